"""The operator's alert rules, as Prometheus rule groups: one definition that the
``PrometheusRule`` construct, the plain rules file (for a Prometheus without the
Prometheus Operator) and ``promtool test rules`` all read.

No rule depends on a counter series appearing: the failure ratio reads
``kubetrain_job_duration_seconds_count``, whose every kind and result exist at 0 from the
operator's start, and the others read gauges (see ``controller/metrics.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Where the runbooks live: ``<base>#<alert name in lower case>``.
DEFAULT_RUNBOOK_URL_BASE = "https://github.com/kubetrain/kubetrain/blob/main/docs/observability.md"

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def check_duration(prop: str, value: str) -> None:
    """Raise unless ``value`` is a Prometheus duration such as ``5m`` or ``1h30m``."""
    if not _DURATION.match(value):
        raise ValueError(
            f"{prop} ({value!r}) must be a Prometheus duration: a number and a unit "
            "(ms, s, m, h, d, w, y), e.g. '5m' or '1h30m'"
        )


@dataclass(frozen=True, kw_only=True)
class AlertThresholds:
    """When each alert fires. Durations are Prometheus durations (``30s``, ``5m``, ``1h``)."""

    operator_down_for: str = "5m"
    """KubetrainOperatorDown: no operator replica scraped as up for this long."""
    no_leader_for: str = "5m"
    """KubetrainNoLeader: replicas up but none leading for this long."""
    reconcile_error_ratio: float = 0.1
    """KubetrainReconcileErrors: share of a kind's reconciles that fail (conflicts aside)."""
    reconcile_errors_for: str = "15m"
    """... sustained this long."""
    pending_seconds: int = 900
    """KubetrainJobStuckPending: a job pending (pods not all running) longer than this."""
    pending_for: str = "1m"
    """... seen this long (the gauge already measures the wait)."""
    failure_ratio: float = 0.5
    """KubetrainJobFailureRatioHigh: share of a kind's finished jobs that failed..."""
    failure_window: str = "1h"
    """... over this window..."""
    failure_min_jobs: int = 5
    """... when at least this many finished in it."""
    failure_for: str = "0s"
    """... seen this long."""
    queue_wait_seconds: float = 30.0
    """KubetrainWorkQueueSlow: the 99th percentile wait of a change before a worker takes it."""
    queue_wait_for: str = "10m"
    """... sustained this long."""
    progress_stall_seconds: int = 1800
    """KubetrainTrainJobProgressStalled: a running TrainJob that reports progress has not
    reported for this long."""
    progress_stall_for: str = "1m"
    """... seen this long."""
    infrastructure_restarts: int = 3
    """KubetrainInfrastructureRestartsFrequent: a kind's jobs in a namespace restarted
    this many times after infrastructure failures (lost nodes, evictions, preemptions)..."""
    infrastructure_window: str = "1h"
    """... within this window."""
    goodput_ratio: float = 0.8
    """KubetrainJobGoodputLow: a running job that had a fault has lost more than this share
    of its time to failures..."""
    goodput_for: str = "10m"
    """... for this long."""
    rate_window: str = "5m"
    """The window of the rate() and histogram rules."""

    def __post_init__(self) -> None:
        for name in (
            "operator_down_for",
            "no_leader_for",
            "reconcile_errors_for",
            "pending_for",
            "failure_window",
            "failure_for",
            "queue_wait_for",
            "progress_stall_for",
            "infrastructure_window",
            "goodput_for",
            "rate_window",
        ):
            check_duration(f"alerts.{name}", getattr(self, name))
        for name in ("reconcile_error_ratio", "failure_ratio", "goodput_ratio"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"alerts.{name} ({value}) must be a share between 0 and 1")
        for name in (
            "pending_seconds",
            "failure_min_jobs",
            "queue_wait_seconds",
            "infrastructure_restarts",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"alerts.{name} ({getattr(self, name)}) must be above 0")
        if self.progress_stall_seconds <= 0:
            raise ValueError(
                f"alerts.progress_stall_seconds ({self.progress_stall_seconds}) must be above 0"
            )


@dataclass(frozen=True)
class Alert:
    """One alerting rule, with what the alert table in docs/observability.md says of it."""

    name: str
    severity: str
    expr: str
    for_: str
    summary: str
    description: str
    meaning: str
    """One line for the alert table: what firing means."""

    def rule(self, runbook_url_base: str) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.for_ not in ("0s", "0m"):
            rule["for"] = self.for_
        rule["labels"] = {"severity": self.severity}
        rule["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook_url": f"{runbook_url_base}#{self.name.lower()}",
        }
        return rule


def alerts(job: str, t: AlertThresholds) -> list[Alert]:
    """The alerts for an operator scraped under Prometheus job label ``job``."""
    sel = f'job="{job}"'
    w = t.rate_window
    finished = f"kubetrain_job_duration_seconds_count{{{sel}}}"
    failed = f'kubetrain_job_duration_seconds_count{{{sel},result="Failed"}}'
    fw = t.failure_window
    infra = f"kubetrain_jobs_infrastructure_restarts_total{{{sel}}}"
    iw = t.infrastructure_window
    return [
        Alert(
            "KubetrainOperatorDown",
            "critical",
            f"absent(up{{{sel}}} == 1)",
            t.operator_down_for,
            "No kubetrain operator replica is up.",
            f"Prometheus has scraped no replica of the operator (job {job}) as up for "
            f"{t.operator_down_for}: no job is being reconciled.",
            "No operator replica answers its metrics scrape.",
        ),
        Alert(
            "KubetrainNoLeader",
            "critical",
            f"sum(kubetrain_is_leader{{{sel}}}) < 1",
            t.no_leader_for,
            "kubetrain operator replicas run, but none leads.",
            f"No replica has held the leader Lease for {t.no_leader_for}: jobs are not reconciled.",
            "Replicas are up but none holds the leader Lease.",
        ),
        Alert(
            "KubetrainReconcileErrors",
            "warning",
            "sum by (kind) (rate(kubetrain_reconcile_errors_total"
            f'{{{sel},error!="conflict"}}[{w}]))'
            f" / sum by (kind) (rate(kubetrain_reconcile_duration_seconds_count{{{sel}}}[{w}]))"
            f" > {t.reconcile_error_ratio:g}",
            t.reconcile_errors_for,
            "{{ $labels.kind }} reconciles are failing.",
            "{{ $value | humanizePercentage }} of {{ $labels.kind }} reconciles failed "
            f"over {w} (more than {t.reconcile_error_ratio:.0%}, conflicts aside).",
            "A kind's reconciles fail (API errors, refusals) above the share set.",
        ),
        Alert(
            "KubetrainJobStuckPending",
            "warning",
            f"max by (kind, namespace) (kubetrain_job_oldest_waiting_seconds{{{sel},"
            f'state="pending"}}) > {t.pending_seconds}',
            t.pending_for,
            "A {{ $labels.kind }} in {{ $labels.namespace }} has been pending too long.",
            "The oldest pending {{ $labels.kind }} in namespace {{ $labels.namespace }} has "
            "waited {{ $value | humanizeDuration }} for its pods to run (threshold "
            f"{t.pending_seconds} s).",
            "A job's pods have not all been running for longer than the threshold.",
        ),
        Alert(
            "KubetrainJobFailureRatioHigh",
            "warning",
            f"(sum by (kind) (increase({failed}[{fw}]))"
            f" / sum by (kind) (increase({finished}[{fw}]))"
            f" > {t.failure_ratio:g}) and sum by (kind) (increase({finished}[{fw}]))"
            f" >= {t.failure_min_jobs}",
            t.failure_for,
            "Many {{ $labels.kind }}s fail.",
            "{{ $value | humanizePercentage }} of the {{ $labels.kind }}s that finished "
            f"in the last {fw} failed (threshold {t.failure_ratio:.0%}); "
            "kubetrain_jobs_failed_total says why.",
            "Too large a share of a kind's finished jobs failed in the window.",
        ),
        Alert(
            "KubetrainWorkQueueSlow",
            "warning",
            "histogram_quantile(0.99, sum by (le) (rate(kubetrain_workqueue_wait_seconds_bucket"
            f"{{{sel}}}[{w}]))) > {t.queue_wait_seconds:g}",
            t.queue_wait_for,
            "The kubetrain operator is falling behind.",
            "Changes wait {{ $value | humanizeDuration }} (99th percentile) before the "
            f"operator acts on them (threshold {t.queue_wait_seconds:g} s).",
            "Changes wait in the work queue longer than the threshold.",
        ),
        Alert(
            "KubetrainTrainJobProgressStalled",
            "warning",
            f"max by (namespace) (kubetrain_trainjob_progress_stale_seconds{{{sel}}})"
            f" > {t.progress_stall_seconds}",
            t.progress_stall_for,
            "A TrainJob in {{ $labels.namespace }} stopped reporting progress.",
            "A running TrainJob in namespace {{ $labels.namespace }} last reported "
            "progress (status.trainerStatus) {{ $value | humanizeDuration }} ago "
            f"(threshold {t.progress_stall_seconds} s).",
            "A running TrainJob that reports progress has gone quiet.",
        ),
        Alert(
            "KubetrainInfrastructureRestartsFrequent",
            "warning",
            # A cause's series is born with its first restart: one that did not exist a
            # window ago counts whole (increase() alone would miss that first restart).
            f"sum by (kind, namespace) ((increase({infra}[{iw}]) and {infra} offset {iw})"
            f" or {infra}) >= {t.infrastructure_restarts}",
            "0s",
            "{{ $labels.kind }} jobs in {{ $labels.namespace }} keep losing their nodes.",
            "{{ $labels.kind }} jobs in namespace {{ $labels.namespace }} were restarted "
            "{{ $value }} times after infrastructure failures (lost or unhealthy nodes, "
            f"evictions, preemptions) within {iw} (threshold {t.infrastructure_restarts}).",
            "Jobs of a kind in a namespace restart after infrastructure failures too often.",
        ),
        Alert(
            "KubetrainJobGoodputLow",
            "warning",
            f"min by (kind, namespace) (kubetrain_job_goodput_min_ratio{{{sel}}})"
            f" < {t.goodput_ratio:g}",
            t.goodput_for,
            "A {{ $labels.kind }} in {{ $labels.namespace }} loses its time to failures.",
            "A running {{ $labels.kind }} in namespace {{ $labels.namespace }} has goodput "
            "{{ $value | humanizePercentage }}: the rest of its time went to failures, "
            f"recovery and steps redone (threshold {t.goodput_ratio:g}). "
            "kubectl get -o wide shows each job's goodput; its Events say why it restarted.",
            "A running job's goodput stays below the threshold.",
        ),
    ]


def rule_groups(job: str, thresholds: AlertThresholds, runbook_url_base: str) -> dict[str, Any]:
    """``{"groups": [...]}``: a Prometheus rules file, and a PrometheusRule's spec."""
    return {
        "groups": [
            {
                "name": "kubetrain-operator",
                "rules": [a.rule(runbook_url_base) for a in alerts(job, thresholds)],
            }
        ]
    }
