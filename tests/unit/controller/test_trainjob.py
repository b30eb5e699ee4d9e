"""The TrainJob through the reconciler, on the in-memory cluster: the status the Kubeflow
SDK reads, a runtime that is missing, and the runtime's in-use finalizer."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.plugins.trainjob_status import CODEC
from kubetrain.controller.reconciler import Reconciler
from tests.unit.controller.builders import NOW, pod, stamp, torch_runtime
from tests.unit.controller.memory_cluster import MemoryCluster

PLUGINS = build_registry(("PyTorchJob", "TFJob", "MPIJob", "TrainJob"))
RUNTIME_KEY = ("ClusterTrainingRuntime", "", "torch")

RUNTIME = torch_runtime()


def trainjob(created_ago: float = 5) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "tj-uid",
            "creationTimestamp": stamp(created_ago),
        },
        "spec": {"runtimeRef": {"name": "torch"}},
    }


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> Any:
        return self.now


def setup(
    *, with_runtime: bool = True, created_ago: float = 5
) -> tuple[MemoryCluster, Reconciler, Any, Clock]:
    cluster = MemoryCluster()
    if with_runtime:
        cluster.runtimes[RUNTIME_KEY] = copy.deepcopy(RUNTIME)
    key = cluster.add_job(trainjob(created_ago))
    clock = Clock()
    return cluster, Reconciler(cluster, cluster, PLUGINS, clock=clock), key, clock


def node_pod(name: str, phase: str = "Running", **kw: Any) -> dict[str, Any]:
    return pod(name, phase, owner_uid="tj-uid", owner_kind="TrainJob", **kw)


def test_no_condition_until_the_end_then_complete() -> None:
    cluster, reconciler, key, _ = setup()
    reconciler.reconcile(key)
    assert set(cluster.children["Pod"]) == {"tj-node-0-0", "tj-node-0-1"}
    status = cluster.jobs[key]["status"]
    assert "conditions" not in status and status["state"] == "Created"
    for name in ("tj-node-0-0", "tj-node-0-1"):
        cluster.children["Pod"][name] = node_pod(name)
    reconciler.reconcile(key)
    status = cluster.jobs[key]["status"]
    assert "conditions" not in status  # the SDK reports Running only without one
    assert (status["state"], status["nodes"], status["readyNodes"]) == ("Running", 2, 2)
    assert status["jobsStatus"] == [
        {"name": "node", "active": 2, "ready": 2, "succeeded": 0, "failed": 0, "suspended": 0}
    ]
    for name in ("tj-node-0-0", "tj-node-0-1"):
        cluster.children["Pod"][name] = node_pod(name, "Succeeded", exit_code=0, reason="Completed")
    reconciler.reconcile(key)
    status = cluster.jobs[key]["status"]
    (complete,) = status["conditions"]
    assert (complete["type"], complete["status"], complete["reason"]) == (
        "Complete",
        "True",
        "TrainJobSucceeded",
    )
    assert complete["lastTransitionTime"] and status["state"] == "Complete"
    assert "completionTime" in status


def test_the_bookkeeping_round_trips() -> None:
    cluster, reconciler, key, _ = setup()
    reconciler.reconcile(key)
    wire = cluster.jobs[key]["status"]
    internal = CODEC.read(wire)
    assert [c.type.value for c in internal.conditions or []] == ["Created"]
    assert CODEC.normalized(wire) == wire


def test_a_trainjob_waits_briefly_for_its_runtime_then_fails() -> None:
    cluster, reconciler, key, clock = setup(with_runtime=False, created_ago=1)
    result = reconciler.reconcile(key)
    assert cluster.children["Pod"] == {}
    status = cluster.jobs[key]["status"]
    assert "conditions" not in status and status["state"] == "Created"
    assert result.requeue_after is not None and result.requeue_after <= 5
    clock.now = NOW + timedelta(seconds=60)
    reconciler.reconcile(key)
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "RuntimeNotFound")
    assert "ClusterTrainingRuntime torch does not exist" in failed["message"]


def test_the_runtime_is_held_while_a_trainjob_names_it() -> None:
    cluster, reconciler, key, _ = setup()
    reconciler.reconcile(RUNTIME_KEY)
    assert K.RUNTIME_IN_USE_FINALIZER in cluster.runtimes[RUNTIME_KEY]["metadata"]["finalizers"]
    cluster.runtimes[RUNTIME_KEY]["metadata"]["deletionTimestamp"] = stamp()
    reconciler.reconcile(RUNTIME_KEY)
    reconciler.reconcile(RUNTIME_KEY)
    held = [e for e in cluster.events if e.reason == "RuntimeInUse"]
    assert len(held) == 1 and "tj" in held[0].message
    del cluster.jobs[key]
    reconciler.reconcile(RUNTIME_KEY)
    assert cluster.runtimes[RUNTIME_KEY]["metadata"]["finalizers"] == []
