"""The operator's job metrics: what the reconciler observes on a status change, what a
scrape reads from the caches, and the series that exist before anything happened."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from kubetrain.api import keys as K
from kubetrain.api.common import JobStatus
from kubetrain.controller.job_metrics import ClusterCollector, job_state, summarize
from kubetrain.controller.metrics import CATALOGUE, JOB_STATES, Metrics
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.reconciler import Reconciler
from kubetrain.controller.trim import trim_pod
from kubetrain.controller.workqueue import WorkQueue
from tests.builders.observed import NOW, pod, pytorch_raw, stamp
from tests.unit.controller.memory_cluster import MemoryCluster

PLUGINS = build_registry(("PyTorchJob", "TFJob", "MPIJob", "TrainJob"))
CODECS = {kind: plugin.status_codec for kind, plugin in PLUGINS.items()}


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> Any:
        return self.now


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_time_to_running_and_the_failure_reason_are_observed_once() -> None:
    cluster = MemoryCluster()
    raw = pytorch_raw(workers=1, run_policy={"activeDeadlineSeconds": 600})
    raw["metadata"]["creationTimestamp"] = stamp(45)
    key = cluster.add_job(raw)
    clock = Clock()
    metrics = Metrics(kinds=("PyTorchJob",))
    reconciler = Reconciler(cluster, cluster, PLUGINS, clock=clock, metrics=metrics)
    registry = metrics.registry
    reconciler.reconcile(key)
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    assert cluster.state(key) == "Running"
    count = "kubetrain_job_time_to_running_seconds_count"
    assert sample(registry, count, kind="PyTorchJob") == 1
    assert sample(registry, "kubetrain_job_time_to_running_seconds_sum", kind="PyTorchJob") == 45
    # The deadline passes: Failed with its reason, the duration counted once.
    clock.now = NOW + timedelta(seconds=600)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    assert cluster.state(key) == "Failed"
    failed = "kubetrain_jobs_failed_total"
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    assert sample(registry, failed, **labels, reason="DeadlineExceeded") == 1
    duration = "kubetrain_job_duration_seconds_count"
    assert sample(registry, duration, kind="PyTorchJob", result="Failed") == 1
    assert sample(registry, duration, kind="PyTorchJob", result="Succeeded") == 0
    assert sample(registry, "kubetrain_jobs_succeeded_total", **labels) is None
    assert sample(registry, count, kind="PyTorchJob") == 1


def test_the_series_alerts_read_exist_at_zero_from_the_start() -> None:
    registry = Metrics(kinds=("PyTorchJob", "MPIJob")).registry
    for kind in ("PyTorchJob", "MPIJob"):
        for result in ("Succeeded", "Failed"):
            labels = {"kind": kind, "result": result}
            assert sample(registry, "kubetrain_job_duration_seconds_count", **labels) == 0
        for error in ("temporary", "permanent", "conflict", "not_found", "gone"):
            labels = {"kind": kind, "error": error}
            assert sample(registry, "kubetrain_reconcile_errors_total", **labels) == 0
    assert sample(registry, "kubetrain_build_info", version=_version()) == 1


def _version() -> str:
    from kubetrain import __version__

    return __version__


def job(
    name: str,
    conditions: list[tuple[str, str]] = (),  # type: ignore[assignment]
    *,
    namespace: str = "team-a",
    created: float = 0,
    queue: str | None = None,
    trainer_updated: float | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": stamp(created),
    }
    if queue is not None:
        meta["labels"] = {K.KUEUE_QUEUE_NAME_LABEL: queue}
    conditions_wire = [
        {"type": kind, "status": value, "lastTransitionTime": stamp(0)}
        for kind, value in conditions
    ]
    if trainer_updated is None:
        status: dict[str, Any] = {"conditions": conditions_wire}
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": meta,
            "status": status,
        }
    # A TrainJob keeps kubetrain's lifecycle in status.kubetrain; the trainer reports progress.
    status = {
        "kubetrain": {"conditions": conditions_wire},
        "trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": stamp(trainer_updated)},
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta,
        "status": status,
    }


def gpu_pod(gpus: int, pool: str | None, phase: str = "Running") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "pytorch", "resources": {"limits": {K.GPU_RESOURCE: str(gpus), "cpu": "4"}}},
            {"name": "sidecar", "resources": {"requests": {"cpu": "1"}}},
        ]
    }
    if pool is not None:
        spec["nodeSelector"] = {K.GPU_POOL_LABEL: pool, "zone": "a"}
    # What the informer keeps of it: the GPU resources and the pool selector only.
    return trim_pod({"metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}})


class Source:
    def __init__(self, jobs: list[dict[str, Any]], pods: dict[str, list[dict[str, Any]]]) -> None:
        self.jobs = jobs
        self.pods = pods

    def cached_jobs(self) -> Iterable[tuple[str, Mapping[str, Any]]]:
        return [(j["kind"], j) for j in self.jobs]

    def status_of(self, kind: str, raw: Mapping[str, Any]) -> JobStatus:
        return CODECS[kind].read(raw.get("status"))

    def pods_of(self, kind: str, raw: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        return self.pods.get(raw["metadata"]["name"], [])

    def api_requests(self) -> Mapping[tuple[str, str], int]:
        return {("patch", "200"): 3, ("create", "409"): 1}

    def watch_restarts(self) -> Mapping[tuple[str, str], int]:
        return {("pods", "error"): 2, ("pods", "expired"): 0}


def source() -> Source:
    jobs = [
        job("new", [("Created", "True")], created=30),
        job("stuck", [("Created", "True")], created=900),
        job("queued", [("Created", "True"), ("Suspended", "True")], created=300, queue="gpu"),
        job("held", [("Created", "True"), ("Suspended", "True")], created=50),
        job("resumed", [("Created", "True"), ("Suspended", "False")], created=5000),
        job("training", [("Created", "True"), ("Running", "True")], trainer_updated=700),
        job("again", [("Created", "True"), ("Running", "False"), ("Restarting", "True")]),
        job("done", [("Created", "True"), ("Succeeded", "True")]),
        job("broke", [("Created", "True"), ("Failed", "True")], namespace="team-b"),
    ]
    pods = {
        "training": [gpu_pod(8, "h100"), gpu_pod(8, "h100"), gpu_pod(8, "h100", "Succeeded")],
        "again": [gpu_pod(4, None)],
        "stuck": [gpu_pod(8, "h100", "Pending")],  # not running: holds nothing yet
    }
    return Source(jobs, pods)


def test_a_scrape_counts_every_job_by_state_with_the_empty_states_at_zero() -> None:
    summary = summarize(source(), NOW)
    states = {
        (kind, ns, state, queue): n
        for (kind, ns, state, queue), n in summary.jobs.items()
        if n or state == "running"
    }
    assert states == {
        ("PyTorchJob", "team-a", "pending", ""): 3,
        ("PyTorchJob", "team-a", "suspended", ""): 1,
        ("PyTorchJob", "team-a", "running", ""): 0,
        ("PyTorchJob", "team-a", "restarting", ""): 1,
        ("PyTorchJob", "team-a", "succeeded", ""): 1,
        ("PyTorchJob", "team-a", "queued", "gpu"): 1,
        ("PyTorchJob", "team-a", "running", "gpu"): 0,
        ("PyTorchJob", "team-b", "failed", ""): 1,
        ("PyTorchJob", "team-b", "running", ""): 0,
        ("TrainJob", "team-a", "running", ""): 1,
    }
    # Every (kind, namespace, queue) reports all seven states.
    assert len(summary.jobs) == 4 * len(JOB_STATES)
    # The longest pending wait is 'stuck' (900 s); 'resumed' waits since its resume (0 s).
    assert summary.oldest_waiting == {
        ("PyTorchJob", "team-a", "pending"): 900,
        ("PyTorchJob", "team-a", "queued"): 300,
    }
    assert summary.gpus == {("team-a", "h100"): 16, ("team-a", "none"): 4}
    assert summary.progress_stale == {"team-a": 700}


def test_the_collector_exposes_only_catalogued_metrics_with_their_labels() -> None:
    registry = CollectorRegistry()
    registry.register(ClusterCollector(source(), clock=lambda: NOW))
    docs = {d.name: d for d in CATALOGUE}
    seen = set()
    for family in registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert name in docs, name
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            assert tuple(s.labels) == docs[name].labels, (s.name, s.labels)
        seen.add(name)
    assert seen == {
        "kubetrain_jobs",
        "kubetrain_job_oldest_waiting_seconds",
        "kubetrain_gpus_requested",
        "kubetrain_trainjob_progress_stale_seconds",
        "kubetrain_job_goodput_min_ratio",
        "kubetrain_job_lost_seconds",
        "kubetrain_job_steps_redone",
        "kubetrain_api_requests_total",
        "kubetrain_watch_restarts_total",
    }
    labels = {"kind": "PyTorchJob", "namespace": "team-b", "state": "failed", "queue": ""}
    assert registry.get_sample_value("kubetrain_jobs", labels) == 1
    assert (
        registry.get_sample_value("kubetrain_api_requests_total", {"verb": "create", "code": "409"})
        == 1
    )


def test_a_suspended_job_in_a_kueue_queue_is_queued_else_suspended() -> None:
    status = CODECS["PyTorchJob"].read(job("x", [("Suspended", "True")])["status"])
    assert job_state(status, {K.KUEUE_QUEUE_NAME_LABEL: "q"}) == "queued"
    assert job_state(status, {}) == "suspended"


def test_the_work_queue_reports_how_long_a_key_waited() -> None:
    waits: list[float] = []
    queue: WorkQueue[str] = WorkQueue(on_wait=waits.append)
    try:
        queue.add("a")
        queue.add("a")  # coalesced: one wait, from the first add
        assert queue.get(timeout=1) == "a"
        queue.done("a")
        assert len(waits) == 1 and waits[0] >= 0
    finally:
        queue.shutdown()


def test_the_pod_cache_keeps_only_the_gpu_resources_and_the_pool() -> None:
    trimmed = gpu_pod(8, "h100")
    assert trimmed["spec"] == {
        "containers": [{"resources": {"limits": {K.GPU_RESOURCE: "8"}}}],
        "nodeSelector": {K.GPU_POOL_LABEL: "h100"},
    }
    cpu_only = trim_pod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    assert cpu_only["spec"] == {}


def test_an_eviction_is_counted_as_a_restart_and_by_its_infrastructure_cause() -> None:
    cluster = MemoryCluster()
    key = cluster.add_job(pytorch_raw(workers=1, restart_policy="Never"))
    metrics = Metrics(kinds=("PyTorchJob",))
    reconciler = Reconciler(cluster, cluster, PLUGINS, clock=Clock(), metrics=metrics)
    reconciler.reconcile(key)
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", pod_reason="Evicted", message="low on memory"
    )
    reconciler.reconcile(key)
    assert cluster.state(key) == "Restarting"  # recreated, not Failed under Never
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    registry = metrics.registry
    infrastructure = "kubetrain_jobs_infrastructure_restarts_total"
    assert sample(registry, infrastructure, **labels, cause="Evicted") == 1
    assert sample(registry, "kubetrain_jobs_restarted_total", **labels) == 1
