"""The reconciler's order of writes and its error handling, on an in-memory cluster."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from kubetrain.controller.errors import ApiError
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.reconciler import Reconciler
from tests.unit.controller.builders import NOW, pod, pytorch_raw
from tests.unit.controller.memory_cluster import MemoryCluster

PLUGINS = build_registry(("PyTorchJob", "TFJob", "MPIJob"))


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def setup(raw: dict[str, Any]) -> tuple[MemoryCluster, Reconciler, tuple[str, str, str], Clock]:
    cluster = MemoryCluster()
    key = cluster.add_job(raw)
    clock = Clock()
    return cluster, Reconciler(cluster, cluster, PLUGINS, clock=clock), key, clock


def test_children_then_status_then_events() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    reconciler.reconcile(key)
    assert cluster.calls == [
        ("apply", "Pod/job-master-0"),
        ("apply", "Service/job-master-0"),
        ("apply", "Service/job-worker-0"),
        ("status", "job"),
        ("event", "PyTorchJobCreated"),
        ("event", "WaitingForReplicas"),
    ]
    assert cluster.state(key) == "Created"


def test_the_status_is_written_only_when_it_changed() -> None:
    cluster, reconciler, key, clock = setup(pytorch_raw(workers=1))
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-master-0"] = pod("job-master-0")
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = pod("job-worker-0")
    reconciler.reconcile(key)
    assert cluster.state(key) == "Running"
    cluster.calls.clear()
    clock.now += timedelta(seconds=30)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    assert cluster.calls == []


def test_a_child_the_api_server_rejects_fails_the_job() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.fail_next["Pod"] = ApiError(
        422,
        "Invalid",
        'Pod "job-master-0" is invalid: spec.containers[0].resources.requests',
        "PATCH /api/v1/pods",
    )
    result = reconciler.reconcile(key)
    assert result.requeue_after is None
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "spec.containers[0].resources.requests" in failed["message"]
    assert [e.reason for e in cluster.events][-1] == "InvalidSpec"


def test_a_temporary_error_is_raised_for_a_retry_and_writes_no_status() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.fail_next["Service"] = ApiError(503, "ServiceUnavailable", "etcd is busy", "PATCH")
    with pytest.raises(ApiError):
        reconciler.reconcile(key)
    assert "status" not in cluster.jobs[key]
    assert (
        reconciler.metrics.reconcile_errors.labels(
            kind="PyTorchJob", error="temporary"
        )._value.get()
        == 1
    )


def test_a_restart_is_committed_to_the_status_before_the_pod_is_deleted() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1, restart_policy="ExitCode"))
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    reconciler.reconcile(key)
    cluster.calls.clear()
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", exit_code=137, reason="OOMKilled"
    )
    reconciler.reconcile(key)
    assert cluster.calls[:2] == [("status", "job"), ("delete", "Pod/job-worker-0")]
    assert cluster.jobs[key]["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    assert cluster.state(key) == "Restarting"
    # The deletion is not visible yet (a stale cache): the failure is not counted twice.
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", exit_code=137, reason="OOMKilled"
    )
    reconciler.reconcile(key)
    assert cluster.jobs[key]["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    registry = reconciler.metrics.registry
    assert registry.get_sample_value("kubetrain_jobs_restarted_total", labels) == 1
    assert registry.get_sample_value("kubetrain_jobs_created_total", labels) == 1


def test_repeated_problems_make_one_event() -> None:
    cluster, reconciler, key, clock = setup(pytorch_raw(workers=1))
    cluster.children["Pod"]["job-master-0"] = pod(
        "job-master-0", "Pending", unschedulable="0/4 nodes are available"
    )
    for _ in range(3):
        reconciler.reconcile(key)
        clock.now += timedelta(seconds=1)
    assert [e.reason for e in cluster.events].count("Unschedulable") == 1
    created = cluster.condition(key, "Created")
    assert created is not None and "Unschedulable: 0/4 nodes are available" in created["message"]


def test_a_job_managed_elsewhere_is_not_touched() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(run_policy={"managedBy": "example.com/other"}))
    reconciler.reconcile(key)
    assert cluster.calls == [] and "status" not in cluster.jobs[key]


def test_a_finished_job_is_deleted_when_its_ttl_passes() -> None:
    cluster, reconciler, key, clock = setup(
        pytorch_raw(workers=1, run_policy={"ttlSecondsAfterFinished": 60})
    )
    cluster.children["Pod"]["job-master-0"] = pod("job-master-0", "Succeeded")
    cluster.children["Pod"]["job-worker-0"] = pod("job-worker-0", "Succeeded")
    result = reconciler.reconcile(key)
    assert cluster.state(key) == "Succeeded"
    assert result.requeue_after == pytest.approx(60.05)
    clock.now += timedelta(seconds=60)
    reconciler.reconcile(key)
    assert ("delete-job", "job") in cluster.calls
    assert key not in cluster.jobs
    reconciler.reconcile(key)  # gone: nothing to do, nothing remembered
    assert reconciler.remembered() == 0


def test_in_place_restarts_are_counted_once_in_the_metrics() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", restarts=2, last_exit=(1, "Error")
    )
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    assert (
        reconciler.metrics.registry.get_sample_value("kubetrain_jobs_restarted_total", labels) == 2
    )
    assert [e.reason for e in cluster.events].count("Error") == 1
