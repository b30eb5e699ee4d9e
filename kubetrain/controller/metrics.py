"""The operator's Prometheus metrics, on a registry of its own (several operators can
run in one process, as the tests do)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """Counters by job kind and namespace, reconcile latency, queue depth, leadership."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        labels = ("kind", "namespace")
        self.jobs_created = Counter(
            "kubetrain_jobs_created_total",
            "Jobs the operator started reconciling (Created condition set).",
            labels,
            registry=self.registry,
        )
        self.jobs_succeeded = Counter(
            "kubetrain_jobs_succeeded_total",
            "Jobs that reached Succeeded.",
            labels,
            registry=self.registry,
        )
        self.jobs_failed = Counter(
            "kubetrain_jobs_failed_total",
            "Jobs that reached Failed.",
            labels,
            registry=self.registry,
        )
        self.jobs_restarted = Counter(
            "kubetrain_jobs_restarted_total",
            "Restarts: pods the operator recreated after a failure, and container restarts "
            "in place (both count against backoffLimit).",
            labels,
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "kubetrain_reconcile_duration_seconds",
            "Time to reconcile one job, by kind and result (ok, requeue, error).",
            ("kind", "result"),
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "kubetrain_reconcile_errors_total",
            "Reconciles that failed, by kind and error class.",
            ("kind", "error"),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "kubetrain_workqueue_depth",
            "Job keys waiting to be reconciled.",
            registry=self.registry,
        )
        self.api_requests = Gauge(
            "kubetrain_api_requests",
            "API requests this process made (watches excluded), since it started.",
            registry=self.registry,
        )
        self.api_writes = Gauge(
            "kubetrain_api_writes",
            "API requests that change something (POST, PATCH, PUT, DELETE) since it started.",
            registry=self.registry,
        )
        self.is_leader = Gauge(
            "kubetrain_is_leader",
            "1 while this replica holds the leader Lease (or leader election is off).",
            registry=self.registry,
        )

    def count(self, event: str, kind: str, namespace: str) -> None:
        """Count a job lifecycle event: created, succeeded, failed or restarted."""
        counter = {
            "created": self.jobs_created,
            "succeeded": self.jobs_succeeded,
            "failed": self.jobs_failed,
            "restarted": self.jobs_restarted,
        }[event]
        counter.labels(kind=kind, namespace=namespace).inc()
