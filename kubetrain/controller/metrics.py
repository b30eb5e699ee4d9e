"""The operator's Prometheus metrics, on a registry of its own (several operators can
run in one process, as the tests do).

Every metric is in :data:`CATALOGUE` with the question it answers; docs/observability.md's metric
table, the alert rules and the dashboard are checked against it. Labels are bounded:
``kind`` (the served kinds), ``namespace`` (the cluster's namespaces with jobs),
``state`` (:data:`JOB_STATES`), ``queue`` (Kueue LocalQueue names), ``reason`` (the
condition reasons in ``controller/reasons.py`` and upstream's), ``pool`` (the GPU pools
of the stack), ``verb``/``code`` (Kubernetes verbs and HTTP codes), ``resource`` (the
watched resources); never a job's or pod's name.

The series an alert reads exist from the start at 0 (every kind's ``job_duration``
results and ``reconcile_errors`` classes), so a first failure is an increase and not a
new series appearing at 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubetrain import __version__
from kubetrain.api import keys as K
from kubetrain.controller.decisions import HANG_METRIC, INFRASTRUCTURE_METRIC
from kubetrain.controller.errors import ErrorClass

#: What a job is doing, in one word (``kubetrain_jobs{state}``): ``pending`` (created, not
#: all pods running), ``queued`` (suspended and in a Kueue queue: waiting for quota),
#: ``suspended`` (suspended by its owner), ``running``, ``restarting``, ``succeeded``,
#: ``failed``.
JOB_STATES = ("pending", "queued", "suspended", "running", "restarting", "succeeded", "failed")
#: The waiting states ``kubetrain_job_oldest_waiting_seconds`` reports.
WAITING_STATES = ("pending", "queued")
#: A finished job's result (``kubetrain_job_duration_seconds{result}``).
RESULTS = ("Succeeded", "Failed")


@dataclass(frozen=True)
class MetricDoc:
    """One metric: its name, type, labels, the question it answers, and its help text."""

    name: str
    type: str
    labels: tuple[str, ...]
    question: str
    help: str


def _doc(name: str, type: str, labels: str, question: str, help: str) -> MetricDoc:
    return MetricDoc(name, type, tuple(labels.split()), question, help)


#: Every metric the operator exposes (counters by their ``_total`` name).
CATALOGUE: tuple[MetricDoc, ...] = (
    _doc(
        "kubetrain_jobs",
        "gauge",
        "kind namespace state queue",
        "How many jobs are pending, queued, running, suspended or finished right now?",
        "Jobs in the operator's cache by state (see JOB_STATES); queue is the Kueue "
        "queue-name label, empty when none.",
    ),
    _doc(
        "kubetrain_job_oldest_waiting_seconds",
        "gauge",
        "kind namespace state",
        "Is a job stuck waiting, and for how long?",
        "Age of the longest-waiting pending or queued job: since its creation or its last "
        "resume, whichever is later.",
    ),
    _doc(
        "kubetrain_job_time_to_running_seconds",
        "histogram",
        "kind",
        "How long do jobs wait from creation to all pods running?",
        "From creation (or resume) to the Running condition, observed once per start.",
    ),
    _doc(
        "kubetrain_job_duration_seconds",
        "histogram",
        "kind result",
        "How long do jobs take to finish, and what share fail?",
        "From creation to Succeeded or Failed (result); every kind's results start at 0.",
    ),
    _doc(
        "kubetrain_jobs_created_total",
        "counter",
        "kind namespace",
        "How many jobs are submitted?",
        "Jobs the operator started reconciling (Created condition set).",
    ),
    _doc(
        "kubetrain_jobs_succeeded_total",
        "counter",
        "kind namespace",
        "How many jobs succeed?",
        "Jobs that reached Succeeded.",
    ),
    _doc(
        "kubetrain_jobs_failed_total",
        "counter",
        "kind namespace reason",
        "Why do jobs fail?",
        "Jobs that reached Failed, by the Failed condition's reason.",
    ),
    _doc(
        "kubetrain_jobs_restarted_total",
        "counter",
        "kind namespace",
        "How often do jobs restart?",
        "Restarts: pods the operator recreated after a failure, and container restarts in "
        "place (the program's count against backoffLimit; the infrastructure's are also "
        "counted by cause in kubetrain_jobs_infrastructure_restarts_total).",
    ),
    _doc(
        "kubetrain_jobs_infrastructure_restarts_total",
        "counter",
        "kind namespace cause",
        "Is the cluster failing the jobs?",
        "Restarts after an infrastructure failure (an eviction, a preemption, a lost node, "
        "DisruptionTarget), by the pod's reason; counted against the job's "
        f"{K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION}, never backoffLimit.",
    ),
    _doc(
        "kubetrain_jobs_hang_restarts_total",
        "counter",
        "kind namespace reason",
        "Do jobs hang?",
        "Gang restarts after a job stopped reporting progress (reason Hang) or never "
        "reported within its startup timeout (NoProgressReport); counted against "
        f"{K.HANG_RESTART_LIMIT_ANNOTATION}.",
    ),
    _doc(
        "kubetrain_job_goodput_min_ratio",
        "gauge",
        "kind namespace",
        "Are failures eating training time?",
        "Lowest goodput (1 - time lost to failures / time since the job first ran) among "
        "the running jobs that had a fault; a job without one has goodput 1.",
    ),
    _doc(
        "kubetrain_job_lost_seconds",
        "gauge",
        "kind namespace",
        "How much training time did failures cost?",
        "Time lost to failures and recovery by the cached jobs (status.goodput.lostSeconds, "
        "and an open fault's loss so far).",
    ),
    _doc(
        "kubetrain_job_steps_redone",
        "gauge",
        "kind namespace",
        "How much work was computed twice?",
        "Steps redone after restarts from the last checkpoint, summed over the cached jobs.",
    ),
    _doc(
        "kubetrain_gpus_requested",
        "gauge",
        "namespace pool",
        "How many GPUs do running jobs hold, per team and pool?",
        f"GPUs ({K.GPU_RESOURCE}) requested by the live pods of running jobs; pool is the "
        f"pod's {K.GPU_POOL_LABEL} node selector (Kueue's flavor puts it there), 'none' "
        "without one.",
    ),
    _doc(
        "kubetrain_trainjob_progress_stale_seconds",
        "gauge",
        "namespace",
        "Has a TrainJob stopped reporting progress?",
        "Longest time since a running TrainJob's status.trainerStatus.lastUpdatedTime, among "
        "those that report progress.",
    ),
    _doc(
        "kubetrain_reconcile_duration_seconds",
        "histogram",
        "kind result",
        "How long does one reconcile take?",
        "Time to reconcile one job, by kind and result (ok, requeue, error).",
    ),
    _doc(
        "kubetrain_reconcile_errors_total",
        "counter",
        "kind error",
        "Is the operator failing to reconcile?",
        "Reconciles that failed, by kind and error class; every class starts at 0.",
    ),
    _doc(
        "kubetrain_api_requests_total",
        "counter",
        "verb code",
        "How hard does the operator use the API server, and does it get errors?",
        "API requests by Kubernetes verb and HTTP status code ('error': no response).",
    ),
    _doc(
        "kubetrain_watch_restarts_total",
        "counter",
        "resource reason",
        "Do the operator's watches keep breaking?",
        "Watches re-opened after a failure (reason error) or a full relist after an "
        "expired resourceVersion (reason expired).",
    ),
    _doc(
        "kubetrain_workqueue_depth",
        "gauge",
        "",
        "Is work backing up?",
        "Job keys waiting to be reconciled.",
    ),
    _doc(
        "kubetrain_workqueue_wait_seconds",
        "histogram",
        "",
        "How long does a change wait before the operator acts on it?",
        "Time a job key spent queued before a worker took it.",
    ),
    _doc(
        "kubetrain_progress_reports_total",
        "counter",
        "code",
        "Do training processes' progress reports get through?",
        "Progress reports (the SDK's update_trainjob_status) the progress server answered, "
        "by HTTP status code: 200 written, 4xx refused (nothing written).",
    ),
    _doc(
        "kubetrain_is_leader",
        "gauge",
        "",
        "Which replica leads, and is there a leader at all?",
        "1 while this replica holds the leader Lease (or leader election is off).",
    ),
    _doc(
        "kubetrain_build_info",
        "gauge",
        "version",
        "Which operator version runs?",
        "Always 1; the version label names the running kubetrain.",
    ),
)
_BY_NAME = {doc.name: doc for doc in CATALOGUE}

_SECONDS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 7200)
_LONG_SECONDS = (10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200)


def _help(name: str) -> str:
    return _BY_NAME[name].help


def _labels(name: str) -> tuple[str, ...]:
    return _BY_NAME[name].labels


class Metrics:
    """The operator's own instruments (the cluster-derived gauges are a collector,
    ``controller/job_metrics.py``, registered on :attr:`registry` by the operator)."""

    def __init__(
        self, registry: CollectorRegistry | None = None, kinds: tuple[str, ...] = ()
    ) -> None:
        self.registry = registry or CollectorRegistry()

        def counter(name: str) -> Counter:
            base = name.removesuffix("_total")
            return Counter(base, _help(name), _labels(name), registry=self.registry)

        def histogram(name: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(
                name, _help(name), _labels(name), buckets=buckets, registry=self.registry
            )

        self.jobs_created = counter("kubetrain_jobs_created_total")
        self.jobs_succeeded = counter("kubetrain_jobs_succeeded_total")
        self.jobs_failed = counter("kubetrain_jobs_failed_total")
        self.jobs_restarted = counter("kubetrain_jobs_restarted_total")
        self.infrastructure_restarts = counter("kubetrain_jobs_infrastructure_restarts_total")
        self.hang_restarts = counter("kubetrain_jobs_hang_restarts_total")
        self.time_to_running = histogram("kubetrain_job_time_to_running_seconds", _SECONDS)
        self.job_duration = histogram("kubetrain_job_duration_seconds", _LONG_SECONDS)
        self.reconcile_duration = histogram(
            "kubetrain_reconcile_duration_seconds",
            (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.reconcile_errors = counter("kubetrain_reconcile_errors_total")
        self.progress_reports = counter("kubetrain_progress_reports_total")
        self.queue_depth = Gauge(
            "kubetrain_workqueue_depth", _help("kubetrain_workqueue_depth"), registry=self.registry
        )
        self.queue_wait = histogram(
            "kubetrain_workqueue_wait_seconds",
            (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
        )
        self.is_leader = Gauge(
            "kubetrain_is_leader", _help("kubetrain_is_leader"), registry=self.registry
        )
        build = Gauge(
            "kubetrain_build_info",
            _help("kubetrain_build_info"),
            _labels("kubetrain_build_info"),
            registry=self.registry,
        )
        build.labels(version=__version__).set(1)
        for kind in kinds:
            for result in RESULTS:
                self.job_duration.labels(kind=kind, result=result)
            for error in ErrorClass:
                self.reconcile_errors.labels(kind=kind, error=error.value)

    def count(self, event: str, kind: str, namespace: str) -> None:
        """Count a job lifecycle event: created, restarted, or ``infrastructure/<cause>``
        (a restart after an infrastructure failure; also counted as restarted)."""
        if event.startswith(HANG_METRIC):
            reason = event.removeprefix(HANG_METRIC)
            self.hang_restarts.labels(kind=kind, namespace=namespace, reason=reason).inc()
            return
        if event.startswith(INFRASTRUCTURE_METRIC):
            cause = event.removeprefix(INFRASTRUCTURE_METRIC) or "Unknown"
            self.infrastructure_restarts.labels(kind=kind, namespace=namespace, cause=cause).inc()
            event = "restarted"
        counter = {"created": self.jobs_created, "restarted": self.jobs_restarted}[event]
        counter.labels(kind=kind, namespace=namespace).inc()

    def finished(
        self, kind: str, namespace: str, result: str, reason: str, seconds: float | None
    ) -> None:
        """A job reached ``result`` (Succeeded or Failed, with the condition's reason)
        ``seconds`` after it was created (None: unknown)."""
        if result == "Failed":
            reason = reason or "Unknown"
            self.jobs_failed.labels(kind=kind, namespace=namespace, reason=reason).inc()
        else:
            self.jobs_succeeded.labels(kind=kind, namespace=namespace).inc()
        if seconds is not None:
            self.job_duration.labels(kind=kind, result=result).observe(max(0.0, seconds))
