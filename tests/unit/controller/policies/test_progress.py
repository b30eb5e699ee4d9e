"""While a job runs: its Created/Running condition and the Warning Events for pod
problems. The operator's own startup gate is a planned wait, not a problem; a gate someone
else put on a pod is one."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import keys as K
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from tests.builders.observed import NOW, batch_job, mpi_raw, pod, service

PLUGINS = build_registry(("MPIJob",))
#: What the API server writes on a pod created with scheduling gates.
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
KUEUE_GATE = "kueue.x-k8s.io/admission"


def launcher_pod(gates: list[str]) -> dict[str, Any]:
    """The launcher Job's pod as the API server serves it: Pending, PodScheduled False
    with reason SchedulingGated (set at creation, kept until the scheduler binds it)."""
    launcher = pod(
        "job-launcher-x7",
        "Pending",
        owner_kind="Job",
        labels={K.REPLICA_TYPE: "launcher", K.JOB_ROLE: "launcher"},
    )
    launcher["status"]["conditions"].append(
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": GATED_MESSAGE,
        }
    )
    launcher["spec"] = {"schedulingGates": [{"name": g} for g in gates]}
    return launcher


def decide(launcher: dict[str, Any], *, workers_ready: bool = False) -> Plan:
    raw = mpi_raw(workers=2)
    raw["status"] = {"sshAuthSecretName": "job-ssh-abcde"}
    worker_1 = pod("job-worker-1", "Running" if workers_ready else "Pending", owner_kind="MPIJob")
    observed = Observed(
        pods={
            p["metadata"]["name"]: p
            for p in (launcher, pod("job-worker-0", owner_kind="MPIJob"), worker_1)
        },
        services={"job": service("job", replica_index=False)},
        batch_jobs={"job-launcher": batch_job("job-launcher")},
        now=NOW,
    )
    return plan(raw, PLUGINS["MPIJob"], observed, Context(now=NOW))


def created_message(p: Plan) -> str:
    assert p.status is not None
    (created,) = [c for c in p.status["conditions"] if c["type"] == "Created"]
    return str(created["message"])


def test_the_operators_own_startup_gate_is_no_warning() -> None:
    p = decide(launcher_pod([K.STARTUP_GATE]))
    assert [(e.type, e.reason) for e in p.events if e.type == "Warning"] == []
    assert "SchedulingGated" not in [e.reason for e in p.events]
    message = created_message(p)
    # The planned wait is stated, not reported as a problem.
    assert "SchedulingGated" not in message and GATED_MESSAGE not in message
    assert "Waiting for the 2 workers to be Ready" in message


def test_the_gate_condition_left_after_the_operator_lifted_its_gate_is_no_warning() -> None:
    # The gate is gone (workers Ready), the scheduler has not bound the pod yet.
    p = decide(launcher_pod([]), workers_ready=True)
    assert [(e.type, e.reason) for e in p.events if e.type == "Warning"] == []
    assert "SchedulingGated" not in created_message(p)


@pytest.mark.parametrize(
    "gates",
    [
        pytest.param([KUEUE_GATE], id="only-a-foreign-gate"),
        pytest.param([KUEUE_GATE, K.STARTUP_GATE], id="a-foreign-gate-beside-the-operators"),
    ],
)
def test_a_gate_someone_else_placed_stays_a_warning(gates: list[str]) -> None:
    p = decide(launcher_pod(gates))
    (warning,) = [e for e in p.events if e.reason == "SchedulingGated"]
    assert warning.type == "Warning"
    assert warning.message == (
        f"pod job-launcher-x7 SchedulingGated: {GATED_MESSAGE} (scheduling gates: {KUEUE_GATE})"
    )
    assert K.STARTUP_GATE not in warning.message
    assert f"pod job-launcher-x7 SchedulingGated: {GATED_MESSAGE}" in created_message(p)
