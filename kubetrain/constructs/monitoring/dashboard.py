"""The operator's Grafana dashboard, as Grafana's dashboard JSON (schema version 39):
jobs by state, time to running, failures by reason, GPUs held, and the operator's health.

Every panel's query is a :class:`Panel` here; docs/observability.md lists them, a unit test checks
that they name only catalogued metrics, and the integration test runs each against a
real Prometheus that scraped a burst of jobs (each must return data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Grafana's variables the queries use: the data source, the operator's scrape job, and
#: the rate window Grafana picks from the scrape interval.
DATASOURCE = "${datasource}"
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    stacked: bool = False


def _q(expr: str, legend: str) -> Query:
    return Query(expr, legend)


def panels() -> list[Panel]:
    """The dashboard's panels, top to bottom, two per row."""
    j = 'job=~"$job"'
    quantiles = tuple(
        _q(
            f"histogram_quantile({q}, sum by (le) (rate("
            f"kubetrain_job_time_to_running_seconds_bucket{{{j}}}[{RATE}])))",
            f"p{int(q * 100)}",
        )
        for q in (0.5, 0.9, 0.99)
    )
    return [
        Panel(
            "Jobs by state",
            "Jobs in the operator's cache by state, every kind and namespace.",
            (_q(f"sum by (state) (kubetrain_jobs{{{j}}})", "{{state}}"),),
            stacked=True,
        ),
        Panel(
            "Running jobs by namespace",
            "Running or restarting jobs per namespace (team).",
            (
                _q(
                    f'sum by (namespace) (kubetrain_jobs{{{j},state=~"running|restarting"}})',
                    "{{namespace}}",
                ),
            ),
            stacked=True,
        ),
        Panel(
            "Longest wait",
            "Age of the longest-waiting pending (pods not running) or queued (waiting for "
            "Kueue quota) job, per kind and namespace.",
            (
                _q(
                    "max by (kind, namespace, state) "
                    f"(kubetrain_job_oldest_waiting_seconds{{{j}}})",
                    "{{state}} {{kind}} {{namespace}}",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Time to running",
            "From a job's creation (or resume) to all its pods running: percentiles.",
            quantiles,
            unit="s",
        ),
        Panel(
            "Failures by reason",
            "Jobs that failed, per reason of their Failed condition (per hour).",
            (
                _q(
                    f"sum by (kind, reason) (increase(kubetrain_jobs_failed_total{{{j}}}[1h]))",
                    "{{kind}} {{reason}}",
                ),
            ),
        ),
        Panel(
            "Failure ratio",
            "Share of each kind's finished jobs that failed, over the last hour.",
            (
                _q(
                    "sum by (kind) (increase(kubetrain_job_duration_seconds_count"
                    f'{{{j},result="Failed"}}[1h])) / sum by (kind) (increase('
                    f"kubetrain_job_duration_seconds_count{{{j}}}[1h]))",
                    "{{kind}}",
                ),
            ),
            unit="percentunit",
        ),
        Panel(
            "GPUs requested by namespace",
            "GPUs the live pods of running jobs request, per namespace and GPU pool.",
            (
                _q(
                    f"sum by (namespace, pool) (kubetrain_gpus_requested{{{j}}})",
                    "{{namespace}} {{pool}}",
                ),
            ),
            stacked=True,
        ),
        Panel(
            "Restarts",
            "Pod restarts the operator counted against backoffLimit, per kind.",
            (
                _q(
                    f"sum by (kind) (increase(kubetrain_jobs_restarted_total{{{j}}}[{RATE}]))",
                    "{{kind}}",
                ),
            ),
        ),
        Panel(
            "TrainJob progress staleness",
            "Longest time since a running TrainJob reported progress, per namespace.",
            (
                _q(
                    f"max by (namespace) (kubetrain_trainjob_progress_stale_seconds{{{j}}})",
                    "{{namespace}}",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Reconciles",
            "Reconciles per second by result, and failed ones by error class.",
            (
                _q(
                    "sum by (result) (rate(kubetrain_reconcile_duration_seconds_count"
                    f"{{{j}}}[{RATE}]))",
                    "{{result}}",
                ),
                _q(
                    f"sum by (error) (rate(kubetrain_reconcile_errors_total{{{j}}}[{RATE}]))",
                    "error: {{error}}",
                ),
            ),
            unit="reqps",
        ),
        Panel(
            "API requests",
            "The operator's requests to the API server per second, by verb and code.",
            (
                _q(
                    f"sum by (verb, code) (rate(kubetrain_api_requests_total{{{j}}}[{RATE}]))",
                    "{{verb}} {{code}}",
                ),
            ),
            unit="reqps",
        ),
        Panel(
            "Work queue",
            "Keys waiting, and the 99th percentile wait before a worker takes one.",
            (
                _q(f"sum(kubetrain_workqueue_depth{{{j}}})", "depth"),
                _q(
                    "histogram_quantile(0.99, sum by (le) (rate("
                    f"kubetrain_workqueue_wait_seconds_bucket{{{j}}}[{RATE}])))",
                    "p99 wait (s)",
                ),
            ),
        ),
        Panel(
            "Infrastructure restarts",
            "Jobs restarted after infrastructure failures (lost or unhealthy nodes, "
            "evictions, preemptions), by kind and cause; backoffLimit is not spent on them.",
            (
                _q(
                    "sum by (kind, cause) (increase("
                    f"kubetrain_jobs_infrastructure_restarts_total{{{j}}}[1h]))",
                    "{{kind}} {{cause}}",
                ),
            ),
        ),
        Panel(
            "Goodput and hangs",
            "Lowest goodput of a running job that had a fault (1: no time lost), and gang "
            "restarts of jobs that stopped reporting progress.",
            (
                _q(
                    f"min by (kind) (kubetrain_job_goodput_min_ratio{{{j}}})",
                    "goodput {{kind}}",
                ),
                _q(
                    "sum by (kind, reason) (increase("
                    f"kubetrain_jobs_hang_restarts_total{{{j}}}[1h]))",
                    "hang restarts {{kind}} {{reason}}",
                ),
            ),
        ),
        Panel(
            "Time lost to failures",
            "Seconds of training lost to failures and recovery, and steps computed twice "
            "after restarts from the last checkpoint, by kind.",
            (
                _q(f"sum by (kind) (kubetrain_job_lost_seconds{{{j}}})", "lost s {{kind}}"),
                _q(f"sum by (kind) (kubetrain_job_steps_redone{{{j}}})", "steps redone {{kind}}"),
            ),
        ),
        Panel(
            "Watch restarts",
            "Watches re-opened after an error, and relists after an expired version.",
            (
                _q(
                    "sum by (resource, reason) (increase(kubetrain_watch_restarts_total"
                    f"{{{j}}}[1h]))",
                    "{{resource}} {{reason}}",
                ),
            ),
        ),
        Panel(
            "Leader",
            "Replicas up, and which one leads (1).",
            (
                _q(f"sum(up{{{j}}})", "replicas up"),
                _q(f"max by (instance) (kubetrain_is_leader{{{j}}})", "leader {{instance}}"),
            ),
        ),
    ]


def _panel(panel: Panel, index: int) -> dict[str, Any]:
    width, height = 12, 8
    custom: dict[str, Any] = {"fillOpacity": 10, "lineWidth": 1}
    if panel.stacked:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": DATASOURCE},
        "gridPos": {"h": height, "w": width, "x": (index % 2) * width, "y": (index // 2) * height},
        "fieldConfig": {"defaults": {"unit": panel.unit, "custom": custom}, "overrides": []},
        "options": {
            "legend": {
                "calcs": [],
                "displayMode": "list",
                "placement": "bottom",
                "showLegend": True,
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [
            {
                "refId": chr(ord("A") + n),
                "datasource": {"type": "prometheus", "uid": DATASOURCE},
                "expr": query.expr,
                "legendFormat": query.legend,
            }
            for n, query in enumerate(panel.queries)
        ],
    }


def dashboard(job: str, uid: str = "kubetrain-operator") -> dict[str, Any]:
    """The dashboard JSON; ``job`` is the default of its scrape-job variable."""
    return {
        "uid": uid,
        "title": "kubetrain: training jobs and operator",
        "description": "Jobs by state, time to running, failures, GPUs held, operator health.",
        "tags": ["kubetrain", "kubeflow", "training"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "hide": 0,
                },
                {
                    "name": "job",
                    "label": "Operator scrape job",
                    "type": "custom",
                    "query": job,
                    "current": {"text": job, "value": job},
                    "hide": 0,
                },
            ]
        },
        "annotations": {"list": []},
        "panels": [_panel(p, i) for i, p in enumerate(panels())],
    }
