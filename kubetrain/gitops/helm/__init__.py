"""Exporting a stack as a Helm chart (``charts/kubetrain/``) whose templates are inferred
from renders of the constructs ``kubetrain synth`` renders, never written by hand.

One module per role:

- :mod:`.chart`: the chart's files (Chart.yaml, values.yaml and its schema, crds/,
  templates/), writing them, the staleness check and the values table of the docs;
- :mod:`.values`: the values (defaults from the stack, the schema from the typed props)
  and the props they mean;
- :mod:`.dimensions`: the axes and probes the operator's renders vary;
- :mod:`.template`: renders of the constructs merged into one templated object tree;
- :mod:`.probes`: values rendered as distinctive texts, found again in the output and
  replaced by the expressions that read them;
- :mod:`.conditions`: the Helm condition under which a templated node is there;
- :mod:`.nodes`: the node types of the templated tree;
- :mod:`.emit`: the tree written as Helm template text.
"""

from kubetrain.gitops.helm.chart import (
    CHART_NAME,
    chart_files,
    operator_template,
    stale_files,
    strip_helm_labels,
    values_table,
    write_chart,
)
from kubetrain.gitops.helm.values import default_values, operator_props, values_schema

__all__ = [
    "CHART_NAME",
    "chart_files",
    "default_values",
    "operator_props",
    "operator_template",
    "stale_files",
    "strip_helm_labels",
    "values_schema",
    "values_table",
    "write_chart",
]
