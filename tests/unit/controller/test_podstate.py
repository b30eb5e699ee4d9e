"""Reading pods: why one failed, whether it was disrupted, what keeps it from running."""

from __future__ import annotations

import pytest

from kubetrain.api import keys as K
from kubetrain.controller import podstate
from tests.builders.observed import pod


@pytest.mark.parametrize(
    ("obj", "exit_code", "reason", "disruption"),
    [
        pytest.param(
            pod("p", "Failed", exit_code=137, reason="OOMKilled"), 137, "OOMKilled", False, id="oom"
        ),
        pytest.param(pod("p", "Failed", exit_code=1), 1, "Error", False, id="error"),
        pytest.param(
            pod("p", "Failed", pod_reason="Evicted", message="low memory"),
            None,
            "Evicted",
            True,
            id="evicted",
        ),
        pytest.param(pod("p", "Failed"), None, "Failed", False, id="no-detail"),
    ],
)
def test_failure(
    obj: dict[str, object], exit_code: int | None, reason: str, disruption: bool
) -> None:
    cause = podstate.failure(obj)
    assert (cause.exit_code, cause.reason) == (exit_code, reason)
    assert podstate.is_disruption(cause) is disruption


def test_failure_prefers_the_main_container() -> None:
    obj = pod("p", "Failed")
    obj["status"]["containerStatuses"] = [
        {"name": "sidecar", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}},
        {"name": "pytorch", "state": {"terminated": {"exitCode": 139, "reason": "Error"}}},
    ]
    assert podstate.failure(obj, "pytorch").exit_code == 139
    assert podstate.failure(obj).exit_code == 2
    assert podstate.failure(obj, "pytorch").describe() == "container pytorch exit code 139 (Error)"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            pod("p", "Pending", unschedulable="0/4 nodes are available"),
            ["Unschedulable"],
            id="unschedulable",
        ),
        pytest.param(
            pod("p", "Pending", waiting="ImagePullBackOff", message="Back-off pulling image"),
            ["ImagePullBackOff"],
            id="image",
        ),
        pytest.param(
            pod(
                "p", "Running", waiting="CrashLoopBackOff", last_exit=(137, "OOMKilled"), restarts=3
            ),
            ["CrashLoopBackOff"],
            id="crashloop",
        ),
        pytest.param(
            pod("p", "Failed", exit_code=137, reason="OOMKilled"), ["OOMKilled"], id="oom-now"
        ),
        pytest.param(
            pod("p", "Running", last_exit=(137, "OOMKilled"), restarts=1), [], id="oom-in-the-past"
        ),
        pytest.param(pod("p", "Running"), [], id="healthy"),
    ],
)
def test_problems(obj: dict[str, object], expected: list[str]) -> None:
    assert [p.reason for p in podstate.problems(obj)] == expected


def gated(*gates: str) -> dict[str, object]:
    """A pod created with scheduling gates: the API server sets PodScheduled False,
    reason SchedulingGated, and keeps it until the scheduler binds the pod."""
    obj = pod("p", "Pending")
    obj["status"]["conditions"].append(
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }
    )
    obj["spec"] = {"schedulingGates": [{"name": g} for g in gates]}
    return obj


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(gated(K.STARTUP_GATE), [], id="the-operators-startup-gate"),
        pytest.param(gated(), [], id="gates-lifted-not-bound-yet"),
        pytest.param(gated("example.com/hold"), ["example.com/hold"], id="a-users-gate"),
        pytest.param(
            gated("kueue.x-k8s.io/admission", K.STARTUP_GATE),
            ["kueue.x-k8s.io/admission"],
            id="kueues-gate-beside-the-operators",
        ),
    ],
)
def test_only_a_gate_placed_by_someone_else_is_a_problem(
    obj: dict[str, object], expected: list[str]
) -> None:
    assert podstate.foreign_gates(obj) == expected
    found = podstate.problems(obj)
    assert [p.reason for p in found] == (["SchedulingGated"] if expected else [])
    if expected:
        assert found[0].message.endswith(f"(scheduling gates: {', '.join(expected)})")


def test_a_crash_loop_names_its_last_exit() -> None:
    obj = pod("p", "Running", waiting="CrashLoopBackOff", last_exit=(137, "OOMKilled"), restarts=3)
    (problem,) = podstate.problems(obj)
    assert "last exit: code 137, OOMKilled" in problem.describe("p")


def test_readiness_and_activity() -> None:
    assert podstate.is_ready(pod("p", "Running"))
    assert not podstate.is_ready(pod("p", "Running", ready=False))
    assert not podstate.is_ready(pod("p", "Pending"))
    assert podstate.is_active(pod("p", "Pending"))
    assert not podstate.is_active(pod("p", "Running", deleting=True))
    assert not podstate.is_active(pod("p", "Succeeded"))


def test_restart_counts_and_the_last_restart() -> None:
    obj = pod("p", "Running", restarts=2, last_exit=(143, "Error"))
    assert podstate.restart_count(obj) == 2
    last = podstate.last_restart(obj)
    assert last is not None and (last.exit_code, last.reason) == (143, "Error")
    assert podstate.last_restart(pod("p", "Running")) is None
