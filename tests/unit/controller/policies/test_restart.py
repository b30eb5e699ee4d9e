"""The restart model: retry or fail per restartPolicy, and backoffLimit counting both
recreated pods and in-place restarts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api.common import RestartPolicy as P
from kubetrain.controller.plugins.base import Observed, Replica
from kubetrain.controller.podstate import Termination
from kubetrain.controller.policies import restart
from tests.unit.controller.builders import pod

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


def test_an_eviction_under_never_fails_with_the_evicted_reason() -> None:
    verdict = restart.evaluate(
        "MPIJob",
        [with_policy(P.NEVER)],
        observe(pod("job-worker-0", "Failed", pod_reason="Evicted", message="low on memory")),
        backoff_limit=None,
        restarts={},
    )
    assert verdict.failure is not None and verdict.failure.reason == "MPIJobEvicted"


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
