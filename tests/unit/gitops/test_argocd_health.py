"""The Argo CD health check, executed by a real Lua 5.1 runtime (what gopher-lua implements)."""

from __future__ import annotations

from typing import Any

import lupa.lua51 as lua51
import pytest

from kubetrain.gitops.argocd import HEALTH_LUA, TRAINJOB_HEALTH_LUA, health_customizations


def health(obj: dict[str, Any], script: str = HEALTH_LUA) -> tuple[str, str]:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)

    def to_lua(value: Any) -> Any:
        if isinstance(value, dict):
            return runtime.table_from({k: to_lua(v) for k, v in value.items()})
        if isinstance(value, list):
            return runtime.table_from([to_lua(v) for v in value])
        return value

    check = runtime.eval(f"function(obj)\n{script}\nend")
    assert callable(check)
    result = check(to_lua(obj))
    return str(result["status"]), str(result["message"])


def job(*conditions: tuple[str, str], suspend: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {"runPolicy": {"suspend": suspend}},
    }
    if conditions:
        obj["status"] = {
            "conditions": [
                {"type": t, "status": s, "message": f"{t} message"} for t, s in conditions
            ]
        }
    return obj


CASES = {
    "no-status-yet": (job(), ("Progressing", "Waiting for the job to start")),
    "created": (job(("Created", "True")), ("Progressing", "Created message")),
    "running": (job(("Created", "True"), ("Running", "True")), ("Healthy", "Running message")),
    "restarting": (
        job(("Created", "True"), ("Running", "False"), ("Restarting", "True")),
        ("Progressing", "Restarting message"),
    ),
    "succeeded": (
        job(("Created", "True"), ("Running", "False"), ("Succeeded", "True")),
        ("Healthy", "Succeeded message"),
    ),
    "failed": (
        job(("Created", "True"), ("Running", "False"), ("Failed", "True")),
        ("Degraded", "Failed message"),
    ),
    "failed-beats-running": (
        job(("Running", "True"), ("Failed", "True")),
        ("Degraded", "Failed message"),
    ),
    "suspended-condition": (
        job(("Created", "True"), ("Suspended", "True")),
        ("Suspended", "Suspended message"),
    ),
    "suspended-by-spec-before-status": (job(suspend=True), ("Suspended", "Job is suspended")),
    "resumed": (
        job(("Created", "True"), ("Suspended", "False"), ("Running", "True")),
        ("Healthy", "Running message"),
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_health_from_conditions(case: str) -> None:
    obj, expected = CASES[case]
    assert health(obj) == expected


def test_every_job_kind_has_the_check() -> None:
    checks = health_customizations()
    assert sorted(checks) == [
        "resource.customizations.health.kubeflow.org_MPIJob",
        "resource.customizations.health.kubeflow.org_PyTorchJob",
        "resource.customizations.health.kubeflow.org_TFJob",
        "resource.customizations.health.trainer.kubeflow.org_TrainJob",
    ]
    assert checks["resource.customizations.health.trainer.kubeflow.org_TrainJob"] == (
        TRAINJOB_HEALTH_LUA
    )


def trainjob(status: dict[str, Any] | None, *, suspend: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "TrainJob", "spec": {"suspend": suspend}}
    if status is not None:
        obj["status"] = status
    return obj


TRAINJOB_CASES: dict[str, tuple[dict[str, Any], tuple[str, str]]] = {
    "new": (trainjob(None), ("Progressing", "Waiting for the TrainJob to start")),
    "created": (
        trainjob({"state": "Created", "nodes": 4, "readyNodes": 1}),
        ("Progressing", "TrainJob is Created (1/4 nodes ready)"),
    ),
    "running": (
        trainjob({"state": "Running", "nodes": 2, "readyNodes": 2}),
        ("Healthy", "TrainJob is running (2/2 nodes ready)"),
    ),
    "restarting": (
        trainjob({"state": "Restarting", "nodes": 2, "readyNodes": 1}),
        ("Progressing", "TrainJob is Restarting (1/2 nodes ready)"),
    ),
    "suspended": (
        trainjob({"state": "Suspended"}, suspend=True),
        ("Suspended", "TrainJob is suspended"),
    ),
    "complete": (
        trainjob(
            {
                "state": "Complete",
                "conditions": [{"type": "Complete", "status": "True", "message": "done"}],
            }
        ),
        ("Healthy", "done"),
    ),
    "failed": (
        trainjob(
            {
                "state": "Failed",
                "conditions": [{"type": "Failed", "status": "True", "message": "OOMKilled"}],
            }
        ),
        ("Degraded", "OOMKilled"),
    ),
}


@pytest.mark.parametrize("case", TRAINJOB_CASES, ids=list(TRAINJOB_CASES))
def test_trainjob_health_reads_state_not_conditions(case: str) -> None:
    obj, expected = TRAINJOB_CASES[case]
    assert health(obj, TRAINJOB_HEALTH_LUA) == expected
