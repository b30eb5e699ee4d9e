"""``OperatorMonitoring``: the Prometheus Operator's ``ServiceMonitor`` and
``PrometheusRule`` for the kubetrain operator, and its Grafana dashboard in a ConfigMap
that Grafana's dashboard sidecar loads. :func:`rules_file` and :func:`dashboard_file`
give the same rules and dashboard as plain files, for a Prometheus or Grafana without
the operator or the sidecar."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.constructs.monitoring.alerts import (
    DEFAULT_RUNBOOK_URL_BASE,
    AlertThresholds,
    check_duration,
    rule_groups,
)
from kubetrain.constructs.monitoring.dashboard import dashboard
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.types import check_dns_label, check_labels

MONITORING_API = "monitoring.coreos.com/v1"


@dataclass(frozen=True, kw_only=True)
class MonitoringProps:
    """Props of :class:`OperatorMonitoring`."""

    namespace: str | None = None
    """Namespace of the ServiceMonitor and PrometheusRule: one the Prometheus selects
    (its ``serviceMonitorNamespaceSelector`` and ``ruleNamespaceSelector``), e.g.
    ``monitoring``. Default: the operator's. The ServiceMonitor finds the operator's
    Service in the operator's namespace either way."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the ServiceMonitor and PrometheusRule, for the Prometheus' selectors
    (``serviceMonitorSelector``, ``ruleSelector``; e.g. ``release: kube-prometheus-stack``).
    Default: none."""
    scrape_interval: str = "30s"
    """How often Prometheus scrapes the operator."""
    job: str | None = None
    """The ``job`` label the operator's series carry in Prometheus, which the rules and
    the dashboard select. Default: the metrics Service's name (what a ServiceMonitor
    gives); set it to your scrape job's name when you use the plain rules file."""
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    """When each alert fires (see the alert table in docs/observability.md)."""
    runbook_url_base: str = DEFAULT_RUNBOOK_URL_BASE
    """Each alert's ``runbook_url`` is this plus ``#<alert name in lower case>``."""
    dashboard: bool = True
    """Ship the Grafana dashboard as a ConfigMap for Grafana's dashboard sidecar."""
    dashboard_namespace: str | None = None
    """Namespace of the dashboard ConfigMap (the sidecar's). Default: the operator's."""
    dashboard_label: tuple[str, str] = ("grafana_dashboard", "1")
    """The label the Grafana sidecar looks for (its default)."""

    def __post_init__(self) -> None:
        if self.namespace is not None:
            check_dns_label("namespace", self.namespace)
        check_labels("labels", self.labels)
        check_duration("scrape_interval", self.scrape_interval)
        if self.job is not None and not self.job.strip():
            raise ValueError("job ('') must name the scrape job, or be None for the Service's")
        if '"' in (self.job or "") or "\\" in (self.job or ""):
            raise ValueError(f"job ({self.job!r}) must not contain quotes or backslashes")
        if not self.runbook_url_base.startswith(("https://", "http://")):
            raise ValueError(f"runbook_url_base ({self.runbook_url_base!r}) must be an http(s) URL")
        if self.dashboard_namespace is not None:
            check_dns_label("dashboard_namespace", self.dashboard_namespace)
        check_labels("dashboard_label", dict([self.dashboard_label]))


def scrape_job(props: MonitoringProps, operator: TrainingOperatorProps) -> str:
    """The job label the operator's series carry."""
    return props.job or f"{operator.name}-metrics"


def rules_file(props: MonitoringProps, operator: TrainingOperatorProps) -> dict[str, Any]:
    """The alert rules as a plain Prometheus rules file."""
    return rule_groups(scrape_job(props, operator), props.alerts, props.runbook_url_base)


def dashboard_file(props: MonitoringProps, operator: TrainingOperatorProps) -> dict[str, Any]:
    """The Grafana dashboard JSON."""
    return dashboard(scrape_job(props, operator))


class OperatorMonitoring(constructs.Construct):
    """Scrape, alert rules and dashboard for a :class:`TrainingOperator`.

    Child ids: ``ServiceMonitor``, ``PrometheusRule`` and (with ``dashboard``)
    ``Dashboard``. Needs the Prometheus Operator's CRDs in the cluster.
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        props: MonitoringProps,
        operator: TrainingOperatorProps,
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        labels = {
            **operator.labels,
            "app.kubernetes.io/name": operator.name,
            "app.kubernetes.io/component": "monitoring",
            "app.kubernetes.io/part-of": "kubetrain",
        }
        meta = {"name": operator.name, "namespace": props.namespace or operator.namespace}
        api_object(
            self,
            "ServiceMonitor",
            {
                "apiVersion": MONITORING_API,
                "kind": "ServiceMonitor",
                "metadata": {**meta, "labels": {**labels, **props.labels}},
                "spec": {
                    "selector": {"matchLabels": operator.selector},
                    "namespaceSelector": {"matchNames": [operator.namespace]},
                    "endpoints": [
                        {
                            "port": "metrics",
                            "path": "/metrics",
                            "scheme": "http",
                            "interval": props.scrape_interval,
                        }
                    ],
                },
            },
        )
        api_object(
            self,
            "PrometheusRule",
            {
                "apiVersion": MONITORING_API,
                "kind": "PrometheusRule",
                "metadata": {**meta, "labels": {**labels, **props.labels}},
                "spec": rules_file(props, operator),
            },
        )
        if props.dashboard:
            key, value = props.dashboard_label
            api_object(
                self,
                "Dashboard",
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": f"{operator.name}-dashboard",
                        "namespace": props.dashboard_namespace or operator.namespace,
                        "labels": {**labels, key: value},
                    },
                    "data": {
                        "kubetrain-operator.json": json.dumps(
                            dashboard_file(props, operator), indent=2
                        )
                        + "\n"
                    },
                },
            )
