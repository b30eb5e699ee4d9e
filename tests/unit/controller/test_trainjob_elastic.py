"""Elastic TrainJobs in the operator (a runtime whose torch policy has ``elasticPolicy``):
the elastic torchrun environment, status.elastic and the scale selector, and a change of
numNodes adding or removing node pods, leaving the others as they are, with an Event."""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.controller.reconciler import Reconciler
from tests.builders.trainer import torch_runtime
from tests.unit.controller.memory_cluster import MemoryCluster
from tests.unit.controller.test_trainjob import PLUGINS, RUNTIME_KEY, Clock, node_pod, trainjob

ELASTIC = {"minNodes": 1, "maxNodes": 4, "maxRestarts": 2}


def _elastic_runtime() -> dict[str, Any]:
    runtime = torch_runtime()
    runtime["spec"]["mlPolicy"]["torch"] = {"elasticPolicy": ELASTIC}
    return runtime


def _setup(runtime: dict[str, Any], nodes: int = 2) -> tuple[MemoryCluster, Reconciler, Any]:
    cluster = MemoryCluster()
    cluster.runtimes[RUNTIME_KEY] = runtime
    job = trainjob()
    job["spec"]["trainer"] = {"numNodes": nodes}
    key = cluster.add_job(job)
    return cluster, Reconciler(cluster, cluster, PLUGINS, clock=Clock()), key


def _env(pod: dict[str, Any]) -> dict[str, str]:
    (node,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    return {e["name"]: e.get("value", "") for e in node.get("env") or []}


def _run(cluster: MemoryCluster, reconciler: Reconciler, key: Any) -> None:
    """Reconcile, then let every node pod run (as kwok would)."""
    reconciler.reconcile(key)
    _running(cluster)
    reconciler.reconcile(key)


def _running(cluster: MemoryCluster) -> None:
    """Every node pod as it was created, now Running."""
    for name, pod in cluster.children["Pod"].items():
        pod["status"] = node_pod(name)["status"]


def _scale(cluster: MemoryCluster, key: Any, nodes: int) -> None:
    job = cluster.jobs[key]
    job["spec"]["trainer"]["numNodes"] = nodes
    job["metadata"]["generation"] = job["metadata"].get("generation", 1) + 1


def test_an_elastic_runtime_gives_torchrun_the_elastic_launch() -> None:
    cluster, reconciler, key = _setup(_elastic_runtime())
    reconciler.reconcile(key)
    for index in range(2):
        env = _env(cluster.children["Pod"][f"tj-node-0-{index}"])
        assert env["PET_NNODES"] == "1:4"
        assert env["PET_RDZV_BACKEND"] == "c10d"
        assert env["PET_RDZV_ENDPOINT"] == "tj-node-0-0.tj:29500"
        assert env["PET_RDZV_ID"] == "tj-uid"
        assert env["PET_MAX_RESTARTS"] == "2"
    status = cluster.jobs[key]["status"]
    assert status["elastic"] == {"minNodes": 1, "maxNodes": 4}
    assert status["selector"] == (
        "jobset.sigs.k8s.io/jobset-name=tj,jobset.sigs.k8s.io/replicatedjob-name=node"
    )


def test_a_fixed_runtime_is_as_before() -> None:
    cluster, reconciler, key = _setup(torch_runtime())
    reconciler.reconcile(key)
    env = _env(cluster.children["Pod"]["tj-node-0-0"])
    assert env["PET_NNODES"] == "2"
    assert not {k for k in env if k.startswith("PET_RDZV") or k == "PET_MAX_RESTARTS"}
    status = cluster.jobs[key]["status"]
    assert "elastic" not in status and "selector" not in status


def test_scaling_adds_and_removes_the_highest_nodes_only() -> None:
    cluster, reconciler, key = _setup(_elastic_runtime())
    _run(cluster, reconciler, key)
    kept = {n: copy.deepcopy(p) for n, p in cluster.children["Pod"].items()}
    _scale(cluster, key, 3)
    reconciler.reconcile(key)
    pods = cluster.children["Pod"]
    assert set(pods) == {"tj-node-0-0", "tj-node-0-1", "tj-node-0-2"}
    assert {n: pods[n] for n in kept} == kept  # neither replaced nor re-applied
    assert _env(pods["tj-node-0-2"])["PET_NNODES"] == "1:4"
    assert cluster.jobs[key]["status"]["nodes"] == 3
    (up,) = [e for e in cluster.events if e.reason == "ScaledUp"]
    assert (up.type, up.message) == (
        "Normal",
        "2 -> 3 nodes (the job's spec: kubectl scale or an edit)",
    )

    _running(cluster)
    reconciler.reconcile(key)
    _scale(cluster, key, 2)
    reconciler.reconcile(key)
    assert set(cluster.children["Pod"]) == set(kept)
    (down,) = [e for e in cluster.events if e.reason == "ScaledDown"]
    assert down.message == "3 -> 2 nodes (the job's spec: kubectl scale or an edit)"
    assert cluster.jobs[key]["status"]["nodes"] == 2
    reconciler.reconcile(key)
    assert [e.reason for e in cluster.events].count("ScaledDown") == 1


def test_rejects_a_trainjob_outside_the_bounds() -> None:
    cluster, reconciler, key = _setup(_elastic_runtime(), nodes=5)
    reconciler.reconcile(key)
    assert not cluster.children.get("Pod")
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert failed["type"] == "Failed"
    assert "spec.trainer.numNodes must be within 1..4" in failed["message"]


def test_without_numnodes_an_elastic_trainjob_starts_with_min_nodes() -> None:
    # minNodes 2, not 1: a runtime defaulted to numNodes 1 would start below its minimum.
    runtime = _elastic_runtime()
    runtime["spec"]["mlPolicy"]["torch"]["elasticPolicy"] = {**ELASTIC, "minNodes": 2}
    del runtime["spec"]["mlPolicy"]["numNodes"]
    cluster, reconciler, key = _setup(runtime)
    del cluster.jobs[key]["spec"]["trainer"]
    reconciler.reconcile(key)
    assert set(cluster.children["Pod"]) == {"tj-node-0-0", "tj-node-0-1"}
    assert _env(cluster.children["Pod"]["tj-node-0-1"])["PET_NNODES"] == "2:4"
    status = cluster.jobs[key]["status"]
    assert status["elastic"] == {"minNodes": 2, "maxNodes": 4}
    assert status["nodes"] == 2


CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
}


def test_a_runtime_with_metrics_gives_each_trainjob_an_hpa_over_its_nodes() -> None:
    runtime = _elastic_runtime()
    runtime["spec"]["mlPolicy"]["torch"]["elasticPolicy"] = {**ELASTIC, "metrics": [CPU]}
    cluster, reconciler, key = _setup(runtime)
    _run(cluster, reconciler, key)
    hpa = cluster.children["HorizontalPodAutoscaler"]["tj"]
    assert hpa["spec"] == {
        "scaleTargetRef": {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "tj",
        },
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [CPU],
    }
    assert hpa["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    # A runtime without metrics: no HPA.
    cluster, reconciler, key = _setup(_elastic_runtime())
    _run(cluster, reconciler, key)
    assert cluster.children["HorizontalPodAutoscaler"] == {}


def test_under_kueue_a_grown_elastic_trainjob_makes_no_pod_beyond_what_kueue_admitted() -> None:
    cluster = MemoryCluster()
    cluster.runtimes[RUNTIME_KEY] = _elastic_runtime()
    job = trainjob()
    job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "team"
    job["spec"]["trainer"] = {"numNodes": 2}
    key = cluster.add_job(job)
    reconciler = Reconciler(cluster, cluster, PLUGINS, clock=Clock())
    _run(cluster, reconciler, key)
    pods = cluster.children["Pod"]
    assert {
        p["metadata"]["annotations"]["kubetrain.dev/admitted-nodes"] for p in pods.values()
    } == {"2"}
    _scale(cluster, key, 3)
    _run(cluster, reconciler, key)
    # The third node waits for Kueue (which suspends the job and admits the new size).
    assert sorted(cluster.children["Pod"]) == ["tj-node-0-0", "tj-node-0-1"]
    # A node recreated after a restart is not held: it takes its neighbours' count.
    del cluster.children["Pod"]["tj-node-0-1"]
    reconciler.reconcile(key)
    assert sorted(cluster.children["Pod"]) == ["tj-node-0-0", "tj-node-0-1"]
    # Resumed by Kueue at the new size (its pods gone): every node is made.
    cluster.children["Pod"].clear()
    reconciler.reconcile(key)
    assert sorted(cluster.children["Pod"]) == [f"tj-node-0-{i}" for i in range(3)]


def test_without_kueue_a_grown_elastic_trainjob_grows_at_once() -> None:
    cluster, reconciler, key = _setup(_elastic_runtime())
    _run(cluster, reconciler, key)
    _scale(cluster, key, 3)
    reconciler.reconcile(key)
    assert "tj-node-0-2" in cluster.children["Pod"]
    assert not any(
        "kubetrain.dev/admitted-nodes" in (p["metadata"].get("annotations") or {})
        for p in cluster.children["Pod"].values()
    )
