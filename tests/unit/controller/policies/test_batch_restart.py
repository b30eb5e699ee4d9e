"""A TrainJob's restarts counted as the Job controller counts them (``batch_restart``):
failed pods replaced whatever the restart policy, each replicated job against its own
backoffLimit, and the container restart that reaches the limit ends the job."""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.reconciler import Reconciler
from tests.builders.observed import NOW, pod
from tests.builders.trainer import torch_runtime
from tests.unit.controller.memory_cluster import MemoryCluster

PLUGINS = build_registry(("TrainJob",))
RUNTIME_KEY = ("ClusterTrainingRuntime", "", "torch")


def _setup(runtime: dict[str, Any]) -> tuple[MemoryCluster, Reconciler, Any]:
    cluster = MemoryCluster()
    cluster.runtimes[RUNTIME_KEY] = copy.deepcopy(runtime)
    key = cluster.add_job(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ns", "uid": "tj-uid"},
            "spec": {"runtimeRef": {"name": "torch"}},
        }
    )
    return cluster, Reconciler(cluster, cluster, PLUGINS, clock=lambda: NOW), key


def _node_template(runtime: dict[str, Any], name: str = "node") -> dict[str, Any]:
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if rjob["name"] == name:
            return dict(rjob["template"])
    raise KeyError(name)


def _with_restart_policy(runtime: dict[str, Any], policy: str) -> dict[str, Any]:
    out = copy.deepcopy(runtime)
    _node_template(out)["spec"]["template"]["spec"]["restartPolicy"] = policy
    return out


def _fail(cluster: MemoryCluster, name: str, code: int = 1) -> None:
    cluster.children["Pod"][name] = pod(
        name,
        "Failed",
        exit_code=code,
        reason="Error",
        uid=f"{name}-{len(cluster.calls)}",
        owner_uid="tj-uid",
        owner_kind="TrainJob",
    )


def _failed_condition(cluster: MemoryCluster, key: Any) -> dict[str, Any] | None:
    conditions = cluster.jobs[key]["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == "Failed"), None)


def test_a_never_pod_that_fails_is_replaced_until_more_than_backoff_limit_failed() -> None:
    # Upstream's Job replaces a failed pod under restartPolicy Never (default limit 6):
    # the job can still complete; the 7th failed pod fails it.
    runtime = _with_restart_policy(torch_runtime(num_nodes=1, backoff_limit=6), "Never")
    cluster, reconciler, key = _setup(runtime)
    reconciler.reconcile(key)
    (name,) = cluster.children["Pod"]
    assert cluster.children["Pod"][name]["spec"]["restartPolicy"] == "Never"
    for failure in range(1, 7):
        _fail(cluster, name)
        reconciler.reconcile(key)  # the failed pod deleted, counted
        assert _failed_condition(cluster, key) is None, failure
        reconciler.reconcile(key)  # and created again
        assert name in cluster.children["Pod"]
        restarts = cluster.jobs[key]["status"]["kubetrain"]["replicaStatuses"]["node"]
        assert restarts["restarts"] == failure
    _fail(cluster, name)
    reconciler.reconcile(key)
    failed = _failed_condition(cluster, key)
    assert failed is not None and "backoffLimit 6 is used up" in failed["message"]


def test_a_never_pod_may_complete_after_a_failure() -> None:
    runtime = _with_restart_policy(torch_runtime(num_nodes=1), "Never")
    cluster, reconciler, key = _setup(runtime)
    reconciler.reconcile(key)
    (name,) = cluster.children["Pod"]
    _fail(cluster, name)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    cluster.children["Pod"][name] = pod(
        name,
        "Succeeded",
        exit_code=0,
        reason="Completed",
        owner_uid="tj-uid",
        owner_kind="TrainJob",
    )
    reconciler.reconcile(key)
    (complete,) = cluster.jobs[key]["status"]["conditions"]
    assert complete["type"] == "Complete"


def test_on_failure_with_backoff_limit_0_fails_at_the_first_restart() -> None:
    cluster, reconciler, key = _setup(torch_runtime(num_nodes=1, backoff_limit=0))
    reconciler.reconcile(key)
    (name,) = cluster.children["Pod"]
    cluster.children["Pod"][name] = pod(
        name, restarts=1, last_exit=(1, "Error"), owner_uid="tj-uid", owner_kind="TrainJob"
    )
    reconciler.reconcile(key)
    failed = _failed_condition(cluster, key)
    assert failed is not None and "backoffLimit 0 is used up" in failed["message"]


def test_each_replicated_job_counts_against_its_own_limit() -> None:
    # An initializer Job with backoffLimit 0 beside the trainer's 1: the trainer's one
    # allowed failure is not spent by the initializer, nor the other way round.
    runtime = torch_runtime(num_nodes=2, backoff_limit=1)
    step = "dataset-initializer"
    container = {"name": step, "image": "i:1"}
    initializer = {
        "name": step,
        "template": {
            "metadata": {"labels": {K.TRAINER_ANCESTOR_LABEL: step}},
            "spec": {"backoffLimit": 3, "template": {"spec": {"containers": [container]}}},
        },
    }
    runtime["spec"]["template"]["spec"]["replicatedJobs"].insert(0, initializer)
    cluster, reconciler, key = _setup(runtime)
    reconciler.reconcile(key)
    pods = sorted(cluster.children["Pod"])
    first_step = next(p for p in pods if "initializer" in p)
    # Three initializer failures, each replaced: within its own limit of 3.
    for _ in range(3):
        _fail(cluster, first_step)
        reconciler.reconcile(key)
        reconciler.reconcile(key)
    assert _failed_condition(cluster, key) is None
    statuses = cluster.jobs[key]["status"]["kubetrain"]["replicaStatuses"]
    assert statuses["dataset-initializer"]["restarts"] == 3
    assert not statuses.get("node", {}).get("restarts")
    # The trainer's Job: one failed pod replaced, the second fails the TrainJob.
    first, second = (p for p in pods if p.startswith("tj-node-"))
    _fail(cluster, first)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    assert _failed_condition(cluster, key) is None
    _fail(cluster, second)
    reconciler.reconcile(key)
    failed = _failed_condition(cluster, key)
    assert failed is not None and "backoffLimit 1 is used up" in failed["message"]
