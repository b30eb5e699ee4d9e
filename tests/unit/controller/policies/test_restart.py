"""The restart model: retry or fail per restartPolicy, and backoffLimit counting both
recreated pods and in-place restarts."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api import keys as K
from kubetrain.api.common import RestartPolicy as P
from kubetrain.controller.model import Observed, Replica
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.podstate import Termination
from kubetrain.controller.policies import restart
from kubetrain.controller.reconciler import Reconciler
from tests.builders.observed import NOW, pod, pytorch_raw
from tests.builders.trainer import torch_runtime
from tests.unit.controller.memory_cluster import MemoryCluster

WORKER = Replica("Worker", 0, "job-worker-0", P.EXIT_CODE, "main")


def with_policy(policy: P, index: int = 0) -> Replica:
    return Replica("Worker", index, f"job-worker-{index}", policy, "main")


@pytest.mark.parametrize(
    ("policy", "cause", "retry"),
    [
        pytest.param(P.NEVER, Termination(137, "OOMKilled"), False, id="never-oom"),
        pytest.param(P.ON_FAILURE, Termination(1, "Error"), True, id="onfailure-error"),
        pytest.param(P.ALWAYS, Termination(1, "Error"), True, id="always-error"),
        pytest.param(P.EXIT_CODE, Termination(137, "OOMKilled"), True, id="exitcode-137"),
        pytest.param(P.EXIT_CODE, Termination(128, "Error"), True, id="exitcode-128"),
        pytest.param(P.EXIT_CODE, Termination(127, "Error"), False, id="exitcode-127"),
        pytest.param(P.EXIT_CODE, Termination(1, "Error"), False, id="exitcode-1"),
        pytest.param(P.EXIT_CODE, Termination(None, "Evicted"), True, id="exitcode-evicted"),
        pytest.param(P.EXIT_CODE, Termination(None, "Failed"), False, id="exitcode-unknown"),
    ],
)
def test_retryable(policy: P, cause: Termination, retry: bool) -> None:
    assert restart.retryable(policy, cause) is retry


def observe(*pods: dict[str, object]) -> Observed:
    return Observed(pods={p["metadata"]["name"]: p for p in pods})  # type: ignore[index]


def test_a_retryable_failure_is_recreated_and_counted() -> None:
    verdict = restart.evaluate(
        "PyTorchJob",
        [WORKER],
        observe(pod("job-worker-0", "Failed", exit_code=137, reason="OOMKilled")),
        backoff_limit=3,
        restarts={},
    )
    assert verdict.failure is None
    assert [r.replica.pod_name for r in verdict.recreate] == ["job-worker-0"]
    assert verdict.restarts == {"Worker": 1} and verdict.used == 1


def test_a_non_retryable_failure_fails_the_job_and_never_restarts() -> None:
    verdict = restart.evaluate(
        "PyTorchJob",
        [WORKER],
        observe(pod("job-worker-0", "Failed", exit_code=1)),
        backoff_limit=None,
        restarts={},
    )
    assert verdict.recreate == ()
    assert verdict.failure is not None
    assert verdict.failure.reason == "PyTorchJobFailed"
    assert "exit code 1" in verdict.failure.message and "ExitCode" in verdict.failure.message


def disrupted(name: str, how: str) -> dict[str, Any]:
    """A pod failed by the infrastructure, as the cluster reports each kind."""
    if how == "evicted":  # the kubelet's node-pressure eviction
        return pod(name, "Failed", pod_reason="Evicted", message="low on memory")
    if how == "node-lost":
        return pod(name, "Failed", pod_reason="NodeLost", message="node gpu-7 lost")
    # PodGC or the taint manager: the DisruptionTarget condition, the container killed.
    failed = pod(name, "Failed", exit_code=137, reason="Error")
    failed["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}
    ]
    return failed


@pytest.mark.parametrize("policy", [P.NEVER, P.ON_FAILURE, P.EXIT_CODE, P.ALWAYS])
@pytest.mark.parametrize("how", ["evicted", "node-lost", "disruption-target"])
def test_an_infrastructure_failure_is_recreated_apart_from_the_backoff_limit(
    policy: P, how: str
) -> None:
    """Whatever the restart policy (Never included), with backoffLimit 2 used up: not the
    program's failure, so recreated and counted apart."""
    verdict = restart.evaluate(
        "MPIJob",
        [with_policy(policy)],
        observe(disrupted("job-worker-0", how)),
        backoff_limit=2,
        restarts={"Worker": 2},
        infrastructure={"Worker": 1},
    )
    assert verdict.failure is None
    (recreated,) = verdict.recreate
    assert recreated.infrastructure and (recreated.used, recreated.limit) == (2, 10)
    assert verdict.restarts == {"Worker": 2} and verdict.used == 2
    assert verdict.infrastructure == {"Worker": 2}
    assert verdict.counted == {"Worker": frozenset({"uid-job-worker-0"})}


def test_the_infrastructure_restart_that_would_exceed_its_budget_fails_the_job() -> None:
    verdict = restart.evaluate(
        "PyTorchJob",
        [WORKER],
        observe(disrupted("job-worker-0", "evicted")),
        backoff_limit=None,
        restarts={},
        infrastructure={"Worker": 3},
        infrastructure_limit=3,
        job_name="job",
    )
    assert verdict.recreate == ()
    assert verdict.failure is not None
    assert verdict.failure.reason == "InfrastructureRestartLimitExceeded"
    assert verdict.failure.message == (
        "PyTorchJob job is failed because 1 Worker replica(s) failed and its infrastructure "
        "restarts (kubetrain.dev/infrastructure-restart-limit 3) are used up: pod job-worker-0 "
        "failed (Evicted: low on memory), an infrastructure failure. Raise the annotation if "
        "the cluster fails this often."
    )
    assert verdict.infrastructure == {"Worker": 3}


@pytest.mark.parametrize(
    ("annotations", "limit"),
    [
        pytest.param({}, (10, None), id="default"),
        pytest.param({K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION: "0"}, (0, None), id="zero"),
        pytest.param({K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION: "25"}, (25, None), id="set"),
        pytest.param({K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION: "-1"}, (10, "-1"), id="negative"),
        pytest.param({K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION: "many"}, (10, "many"), id="word"),
    ],
)
def test_the_infrastructure_budget_is_the_jobs_annotation(
    annotations: dict[str, str], limit: tuple[int, str | None]
) -> None:
    raw = pytorch_raw(workers=1)
    raw["metadata"]["annotations"] = annotations
    job = RECONCILE_PLUGINS["PyTorchJob"].load(raw, Observed()).job
    assert job is not None
    assert restart.infrastructure_limit(job) == limit


def test_an_invalid_infrastructure_budget_fails_the_job_as_invalid() -> None:
    cluster = MemoryCluster()
    raw = pytorch_raw(workers=1)
    raw["metadata"]["annotations"] = {K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION: "many"}
    key = cluster.add_job(raw)
    Reconciler(cluster, cluster, RECONCILE_PLUGINS, clock=lambda: NOW).reconcile(key)
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert (
        "metadata.annotations[kubetrain.dev/infrastructure-restart-limit]: 'many': expected a "
        'whole number of restarts, e.g. "10"' in failed["message"]
    )


def test_the_restart_that_would_exceed_the_limit_fails_the_job() -> None:
    verdict = restart.evaluate(
        "PyTorchJob",
        [WORKER],
        observe(pod("job-worker-0", "Failed", exit_code=143)),
        backoff_limit=2,
        restarts={"Worker": 2},
    )
    assert verdict.failure is not None and verdict.failure.reason == "BackoffLimitExceeded"
    assert verdict.restarts == {"Worker": 2}  # unchanged: nothing was recreated


def test_in_place_restarts_count_against_the_limit() -> None:
    replica = with_policy(P.ON_FAILURE)
    ok = restart.evaluate(
        "PyTorchJob",
        [replica],
        observe(pod("job-worker-0", restarts=1, last_exit=(1, "Error"))),
        backoff_limit=1,
        restarts={},
    )
    assert ok.failure is None and ok.used == 1
    over = restart.evaluate(
        "PyTorchJob",
        [replica],
        observe(pod("job-worker-0", restarts=2, last_exit=(1, "Error"))),
        backoff_limit=1,
        restarts={},
    )
    assert over.failure is not None and over.failure.reason == "BackoffLimitExceeded"
    assert "exit code 1" in over.failure.message


def test_a_failure_already_counted_is_not_counted_again() -> None:
    failed = pod("job-worker-0", "Failed", exit_code=137, uid="u1")
    verdict = restart.evaluate(
        "PyTorchJob",
        [WORKER],
        observe(failed),
        backoff_limit=1,
        restarts={"Worker": 1},
        counted={"Worker": frozenset({"u1"})},
    )
    assert verdict.failure is None
    assert verdict.recreate[0].counted_now is False and verdict.restarts == {"Worker": 1}
    assert verdict.counted == {"Worker": frozenset({"u1"})}


def test_a_counted_failure_is_recorded_with_the_count_and_dropped_once_gone() -> None:
    verdict = restart.evaluate(
        "PyTorchJob",
        [WORKER, with_policy(P.EXIT_CODE, 1)],
        observe(
            pod("job-worker-0", "Failed", exit_code=137, uid="new"),
            pod("job-worker-1", uid="recreated"),
        ),
        backoff_limit=None,
        restarts={"Worker": 1},
        # "gone" was worker-1's failed pod: deleted and replaced since it was counted.
        counted={"Worker": frozenset({"gone"})},
    )
    assert verdict.restarts == {"Worker": 2}
    assert verdict.counted == {"Worker": frozenset({"new"})}


def test_new_in_place_restarts_are_reported_once() -> None:
    running = pod("job-worker-0", restarts=2, uid="u1", last_exit=(137, "OOMKilled"))
    replica = with_policy(P.ON_FAILURE)
    first = restart.evaluate(
        "PyTorchJob",
        [replica],
        observe(running),
        backoff_limit=None,
        restarts={},
        seen_restart_counts={"u1": 1},
    )
    assert [(r.pod, r.count) for r in first.in_place] == [("job-worker-0", 2)]
    again = restart.evaluate(
        "PyTorchJob",
        [replica],
        observe(running),
        backoff_limit=None,
        restarts={},
        seen_restart_counts={"u1": 2},
    )
    assert again.in_place == ()


def test_tolerated_failures_are_ignored() -> None:
    verdict = restart.evaluate(
        "TFJob",
        [with_policy(P.NEVER)],
        observe(pod("job-worker-0", "Failed", exit_code=1)),
        backoff_limit=0,
        restarts={},
        tolerates_failure=lambda r: True,
    )
    assert verdict.failure is None and verdict.recreate == ()


@given(
    limit=st.integers(min_value=0, max_value=5),
    made=st.integers(min_value=0, max_value=6),
    in_place=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=4),
    failed=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_every_decision_ends_in_a_restart_within_budget_or_a_failure(
    limit: int, made: int, in_place: list[int], failed: list[bool]
) -> None:
    replicas = [with_policy(P.ON_FAILURE, i) for i in range(len(in_place))]
    pods = [
        pod(r.pod_name, "Failed", exit_code=1)
        if failed[i]
        else pod(r.pod_name, restarts=in_place[i])
        for i, r in enumerate(replicas)
    ]
    verdict = restart.evaluate(
        "PyTorchJob", replicas, observe(*pods), backoff_limit=limit, restarts={"Worker": made}
    )
    live = sum(n for i, n in enumerate(in_place) if not failed[i])
    if verdict.failure is None:
        # Within budget, and every failed pod is being recreated.
        assert verdict.used <= limit
        assert verdict.used == sum(verdict.restarts.values()) + live
        assert {r.replica.pod_name for r in verdict.recreate} == {
            r.pod_name for i, r in enumerate(replicas) if failed[i]
        }
    else:
        assert verdict.failure.reason == "BackoffLimitExceeded"
        assert verdict.recreate == ()
        assert made + live + sum(failed) > limit


# -- Each restart worded once, never above the limit, through the reconciler ------------

RECONCILE_PLUGINS = build_registry(("PyTorchJob", "TrainJob"))
RESTARTS_USED = re.compile(r"restarts used: (\d+) of (\d+)")


def budget_events(cluster: MemoryCluster) -> list[tuple[str, str]]:
    """(reason, "N of L") for each Event quoting the budget, and the failure's reason."""
    out = []
    for event in cluster.events:
        found = RESTARTS_USED.search(event.message)
        if found:
            out.append((event.reason, f"{found.group(1)} of {found.group(2)}"))
        elif event.reason == "BackoffLimitExceeded":
            out.append((event.reason, ""))
    return out


def assert_never_above_the_limit(cluster: MemoryCluster) -> None:
    for event in cluster.events:
        for used, limit in RESTARTS_USED.findall(event.message):
            assert int(used) <= int(limit), event.message


def restarted(name: str, count: int, **kw: Any) -> dict[str, Any]:
    """A live pod whose container restarted in place ``count`` times, the last with
    exit code 1 (what the kubelet reports under OnFailure)."""
    return pod(name, restarts=count, uid=f"uid-{name}", last_exit=(1, "Error"), **kw)


def pytorch_onfailure(limit: int) -> tuple[MemoryCluster, Reconciler, Any]:
    cluster = MemoryCluster()
    key = cluster.add_job(pytorch_raw(workers=1, run_policy={"backoffLimit": limit}))
    reconciler = Reconciler(cluster, cluster, RECONCILE_PLUGINS, clock=lambda: NOW)
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = restarted(name, 0)
    reconciler.reconcile(key)
    assert cluster.state(key) == "Running"
    return cluster, reconciler, key


def test_in_place_restarts_are_worded_one_by_one_up_to_the_limit_then_fail() -> None:
    cluster, reconciler, key = pytorch_onfailure(2)
    for count in (1, 2, 3):
        cluster.children["Pod"]["job-worker-0"] = restarted("job-worker-0", count)
        reconciler.reconcile(key)
        reconciler.reconcile(key)  # looking again changes nothing
    assert budget_events(cluster) == [
        ("Error", "1 of 2"),
        ("Error", "2 of 2"),
        ("BackoffLimitExceeded", ""),
    ]
    assert_never_above_the_limit(cluster)
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "backoffLimit 2 is used up: pod job-worker-0 failed" in failed["message"]
    assert "exit code 1 (Error)" in failed["message"]
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    assert (
        reconciler.metrics.registry.get_sample_value("kubetrain_jobs_restarted_total", labels) == 2
    )


@pytest.mark.parametrize(
    "looks",
    [
        pytest.param((3,), id="all-three-in-one-look"),
        pytest.param((1, 3), id="the-last-two-in-one-look"),
        pytest.param((2, 3), id="the-first-two-in-one-look"),
    ],
)
def test_restarts_between_two_looks_are_each_counted_once(looks: tuple[int, ...]) -> None:
    """However the restarts fall between the operator's looks (watch events coalesce),
    the same Events: one per restartCount step."""
    cluster, reconciler, key = pytorch_onfailure(2)
    for count in looks:
        cluster.children["Pod"]["job-worker-0"] = restarted("job-worker-0", count)
        reconciler.reconcile(key)
    assert [used for _, used in budget_events(cluster)] == ["1 of 2", "2 of 2", ""]
    assert_never_above_the_limit(cluster)
    assert cluster.state(key) == "Failed"


def test_two_pods_restarting_in_one_look_are_numbered_apart() -> None:
    cluster, reconciler, key = pytorch_onfailure(2)
    cluster.children["Pod"]["job-master-0"] = restarted("job-master-0", 1)
    cluster.children["Pod"]["job-worker-0"] = restarted("job-worker-0", 1)
    reconciler.reconcile(key)
    messages = [e.message for e in cluster.events if RESTARTS_USED.search(e.message)]
    assert len(messages) == 2
    assert "job-master-0 restarted a container" in messages[0] and "1 of 2" in messages[0]
    assert "job-worker-0 restarted a container" in messages[1] and "2 of 2" in messages[1]
    assert cluster.state(key) == "Running"


def test_a_recreation_in_the_same_look_is_numbered_after_the_in_place_restarts() -> None:
    cluster, reconciler, key = pytorch_onfailure(2)
    cluster.children["Pod"]["job-master-0"] = restarted("job-master-0", 1)
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", exit_code=137, reason="OOMKilled"
    )
    reconciler.reconcile(key)
    assert budget_events(cluster) == [("Error", "1 of 2"), ("OOMKilled", "2 of 2")]
    restarting = cluster.condition(key, "Restarting")
    assert restarting is not None and "restarts used: 2 of 2" in restarting["message"]


def test_an_eviction_in_the_same_look_is_worded_against_its_own_budget() -> None:
    """The in-place restart is the program's (1 of backoffLimit 2); the eviction beside it
    is the infrastructure's, numbered against its own budget, backoffLimit untouched."""
    cluster, reconciler, key = pytorch_onfailure(2)
    annotations = cluster.jobs[key]["metadata"].setdefault("annotations", {})
    annotations[K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION] = "Pod"  # not the gang default
    cluster.children["Pod"]["job-master-0"] = restarted("job-master-0", 1)
    cluster.children["Pod"]["job-worker-0"] = disrupted("job-worker-0", "evicted")
    reconciler.reconcile(key)
    assert budget_events(cluster) == [("Error", "1 of 2"), ("Evicted", "1 of 10")]
    evicted = next(e for e in cluster.events if e.reason == "Evicted")
    assert evicted.message == (
        "PyTorchJob job is restarting because 1 Worker replica(s) failed: pod job-worker-0 is "
        "recreated after an infrastructure failure (Evicted: low on memory); infrastructure "
        "restarts used: 1 of 10, backoffLimit untouched."
    )
    restarting = cluster.condition(key, "Restarting")
    assert (
        restarting is not None
        and "infrastructure restarts used: 1 of 10" in (restarting["message"])
    )
    statuses = cluster.jobs[key]["status"]["replicaStatuses"]
    assert statuses["Worker"]["infrastructureRestarts"] == 1
    assert "restarts" not in statuses["Worker"] and "restarts" not in statuses["Master"]


def test_a_new_operator_process_words_only_the_latest_restart_of_a_pod_it_never_saw() -> None:
    """Its memory died with the old process: the earlier restarts were worded then."""
    cluster, first, key = pytorch_onfailure(5)
    for count in (1, 2):
        cluster.children["Pod"]["job-worker-0"] = restarted("job-worker-0", count)
        first.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = restarted("job-worker-0", 3)
    cluster.events.clear()
    second = Reconciler(cluster, cluster, RECONCILE_PLUGINS, clock=lambda: NOW)
    second.reconcile(key)
    assert budget_events(cluster) == [("Error", "3 of 5")]
    cluster.children["Pod"]["job-worker-0"] = restarted("job-worker-0", 5)
    second.reconcile(key)
    assert [used for _, used in budget_events(cluster)] == ["3 of 5", "4 of 5", "5 of 5"]


#: backoffLimit 6, as batch/v1 defaults it when unset.
TRAINJOB_RUNTIME = torch_runtime(num_nodes=1, backoff_limit=6)


def test_a_trainjob_fails_at_the_restart_that_reaches_its_jobs_backoff_limit() -> None:
    # As the Job controller: with OnFailure, container restarts reaching backoffLimit (6)
    # fail the Job, so the 6th exit ends the TrainJob (the v1 model allows 6 restarts).
    cluster = MemoryCluster()
    cluster.runtimes[("ClusterTrainingRuntime", "", "torch")] = copy.deepcopy(TRAINJOB_RUNTIME)
    key = cluster.add_job(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ns", "uid": "tj-uid"},
            "spec": {"runtimeRef": {"name": "torch"}},
        }
    )
    reconciler = Reconciler(cluster, cluster, RECONCILE_PLUGINS, clock=lambda: NOW)
    reconciler.reconcile(key)
    (name,) = cluster.children["Pod"]
    for count in range(8):
        cluster.children["Pod"][name] = restarted(
            name, count, owner_uid="tj-uid", owner_kind="TrainJob"
        )
        reconciler.reconcile(key)
    assert budget_events(cluster) == [
        *(("Error", f"{n} of 6") for n in range(1, 6)),
        ("BackoffLimitExceeded", ""),
    ]
    assert_never_above_the_limit(cluster)
    status = cluster.jobs[key]["status"]
    (failed,) = status["conditions"]
    # Upstream's reason on the condition the SDK reads; kubetrain's in its bookkeeping.
    assert (failed["type"], failed["reason"]) == ("Failed", "FailedJobs")
    assert "backoffLimit 6 is used up" in failed["message"]
    own = [c["reason"] for c in status["kubetrain"]["conditions"] if c["type"] == "Failed"]
    assert own == ["BackoffLimitExceeded"]
