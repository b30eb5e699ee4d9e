"""The monitoring constructs: the rules and dashboard read only metrics the operator
exposes, the objects are valid for the Prometheus Operator's CRDs, the props refuse bad
input, and docs/observability.md's tables say what the code does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from kubetrain.constructs.monitoring import (
    AlertThresholds,
    MonitoringProps,
    OperatorMonitoring,
    dashboard_file,
    rules_file,
)
from kubetrain.constructs.monitoring.alerts import alerts
from kubetrain.constructs.monitoring.dashboard import panels
from kubetrain.constructs.objects import chart_manifests
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.types import Image
from kubetrain.controller.metrics import CATALOGUE
from tests.k8s_schema import assert_valid

ROOT = Path(__file__).resolve().parents[3]
OPERATOR = TrainingOperatorProps(image=Image("ghcr.io/kubetrain/operator:0.1.0"))
#: Series names a query may read: the catalogue's (histograms with their suffixes) and up.
KNOWN = {"up"} | {
    name + suffix
    for d in CATALOGUE
    for name, suffixes in [
        (d.name, ("_bucket", "_count", "_sum") if d.type == "histogram" else ("",))
    ]
    for suffix in suffixes
}
_FUNCTIONS = {
    *("sum", "max", "min", "rate", "increase", "histogram_quantile", "absent"),
    *("by", "and", "or", "unless"),
}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads (label names and functions aside)."""
    without_labels = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    without_offsets = re.sub(r"offset \d+[smhdwy]", "", without_labels)
    without_grouping = re.sub(r"by \([^)]*\)", "", without_offsets)
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_grouping))
    return {n for n in names if n not in _FUNCTIONS and not re.fullmatch(r"\d+[smhdwy]", n)}


def test_every_rule_and_panel_reads_only_metrics_the_operator_exposes() -> None:
    exprs = [a.expr for a in alerts("j", AlertThresholds())]
    exprs += [q.expr for p in panels() for q in p.queries]
    for expr in exprs:
        unknown = metric_names(expr) - KNOWN
        assert not unknown, f"{expr} reads {unknown}, not in controller/metrics.py's CATALOGUE"


def test_the_objects_are_valid_for_the_prometheus_operators_crds() -> None:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "c")
    OperatorMonitoring(chart, "m", MonitoringProps(labels={"release": "prom"}), OPERATOR)
    objects = chart_manifests(chart)
    assert [o["kind"] for o in objects] == ["ServiceMonitor", "PrometheusRule", "ConfigMap"]
    assert_valid(objects)
    monitor, rule, config_map = objects
    # The ServiceMonitor selects the operator's metrics Service by its labels and port.
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "kubetrain-operator",
        "app.kubernetes.io/component": "operator",
    }
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert rule["spec"] == rules_file(MonitoringProps(), OPERATOR)
    assert monitor["metadata"]["namespace"] == rule["metadata"]["namespace"] == "kubetrain-system"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["kubetrain-operator.json"])
    assert dashboard == dashboard_file(MonitoringProps(), OPERATOR)


def test_the_monitor_and_rules_may_live_where_prometheus_looks() -> None:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "c")
    OperatorMonitoring(chart, "m", MonitoringProps(namespace="monitoring"), OPERATOR)
    monitor, rule, dashboard = chart_manifests(chart)
    assert monitor["metadata"]["namespace"] == rule["metadata"]["namespace"] == "monitoring"
    # It still selects the operator's Service in the operator's namespace.
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["kubetrain-system"]}
    assert dashboard["metadata"]["namespace"] == "kubetrain-system"


def test_the_rules_select_the_scrape_job_and_carry_runbooks() -> None:
    props = MonitoringProps(job="kubetrain", runbook_url_base="https://wiki.example.com/kt")
    for rule in rules_file(props, OPERATOR)["groups"][0]["rules"]:
        assert 'job="kubetrain"' in rule["expr"], rule["alert"]
        assert rule["annotations"]["runbook_url"] == (
            f"https://wiki.example.com/kt#{rule['alert'].lower()}"
        )
        assert rule["labels"]["severity"] in ("critical", "warning")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: AlertThresholds(pending_for="5 minutes"), "alerts.pending_for ('5 minutes')"),
        (lambda: AlertThresholds(failure_ratio=1.5), "alerts.failure_ratio (1.5) must be a share"),
        (lambda: AlertThresholds(pending_seconds=0), "alerts.pending_seconds (0) must be above 0"),
        (lambda: MonitoringProps(scrape_interval="30"), "scrape_interval ('30')"),
        (lambda: MonitoringProps(job='a"b'), "job ('a\"b') must not contain quotes"),
        (lambda: MonitoringProps(runbook_url_base="wiki/kt"), "must be an http(s) URL"),
        (lambda: MonitoringProps(dashboard_namespace="Not_A_Name"), "dashboard_namespace"),
        (lambda: MonitoringProps(namespace="Mon"), "namespace ('Mon')"),
    ],
)
def test_bad_props_are_refused_naming_the_prop_and_value(build: Any, message: str) -> None:
    with pytest.raises(ValueError) as err:
        build()
    assert message in str(err.value)


# --- docs/observability.md's tables ---------------------------------------------------


def metrics_table() -> str:
    rows = ["| metric | type | labels | answers |", "|---|---|---|---|"]
    for d in CATALOGUE:
        labels = ", ".join(f"`{label}`" for label in d.labels) or "none"
        rows.append(f"| `{d.name}` | {d.type} | {labels} | {d.question} |")
    return "\n".join(rows) + "\n"


def alerts_table() -> str:
    rows = ["| alert | severity | fires when (default) | runbook |", "|---|---|---|---|"]
    thresholds = AlertThresholds()
    for a in alerts("kubetrain-operator-metrics", thresholds):
        when = a.meaning + (f" For {a.for_}." if a.for_ not in ("0s", "0m") else "")
        rows.append(f"| `{a.name}` | {a.severity} | {when} | [runbook](#{a.name.lower()}) |")
    return "\n".join(rows) + "\n"


def panels_table() -> str:
    rows = ["| panel | query |", "|---|---|"]
    for p in panels():
        queries = "<br>".join("`" + q.expr.replace("|", "\\|") + "`" for q in p.queries)
        rows.append(f"| {p.title} | {queries} |")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("table", [metrics_table, alerts_table, panels_table])
def test_the_documented_tables_are_the_codes(table: Any) -> None:
    text = table()
    assert text in (ROOT / "docs/observability.md").read_text(), (
        f"docs/observability.md lacks this table:\n{text}"
    )


def test_every_alert_has_a_runbook_section() -> None:
    docs = (ROOT / "docs" / "observability.md").read_text()
    for a in alerts("j", AlertThresholds()):
        assert f"\n### {a.name}\n" in docs, f"docs/observability.md has no runbook for {a.name}"


def test_the_monitor_follows_an_operator_found_as_trainer() -> None:
    """With upstream Trainer's labels on the operator (``found_as_trainer``), the
    ServiceMonitor selects its metrics Service by those."""
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "c")
    operator = TrainingOperatorProps(image=OPERATOR.image, found_as_trainer=True)
    OperatorMonitoring(chart, "m", MonitoringProps(), operator)
    monitor = chart_manifests(chart)[0]
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "trainer",
        "app.kubernetes.io/component": "manager",
    }
