"""The Argo CD health check, executed by a real Lua 5.1 runtime (what gopher-lua implements)."""

from __future__ import annotations

from typing import Any

import lupa.lua51 as lua51
import pytest

from kubetrain.gitops.argocd import (
    APPLICATION_HEALTH_LUA,
    CRD_HEALTH_LUA,
    HEALTH_LUA,
    TRAINJOB_HEALTH_LUA,
    health_customizations,
    tracking_id,
)


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
        "resource.customizations.health.apiextensions.k8s.io_CustomResourceDefinition",
        "resource.customizations.health.argoproj.io_Application",
        "resource.customizations.health.kubeflow.org_JAXJob",
        "resource.customizations.health.kubeflow.org_MPIJob",
        "resource.customizations.health.kubeflow.org_PaddleJob",
        "resource.customizations.health.kubeflow.org_PyTorchJob",
        "resource.customizations.health.kubeflow.org_TFJob",
        "resource.customizations.health.kubeflow.org_XGBoostJob",
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


def application(sync: str | None, health: str | None, phase: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if sync:
        status["sync"] = {"status": sync}
    if health:
        status["health"] = {"status": health, "message": f"{health} message"}
    if phase:
        status["operationState"] = {"phase": phase, "message": f"{phase} message"}
    obj: dict[str, Any] = {"kind": "Application", "metadata": {"name": "local-crds"}}
    if status:
        obj["status"] = status
    return obj


def moved(app: dict[str, Any], compared: str, wanted: str) -> dict[str, Any]:
    """``app`` with spec source path ``wanted`` and its status compared to ``compared``."""
    source = {"repoURL": "file:///git", "targetRevision": "HEAD"}
    app["spec"] = {"source": {**source, "path": wanted}}
    app["status"]["sync"]["comparedTo"] = {"source": {**source, "path": compared}}
    return app


APPLICATION_CASES: dict[str, tuple[dict[str, Any], tuple[str, str]]] = {
    "just-created": (
        {"kind": "Application", "metadata": {"name": "x"}},
        ("Progressing", "Waiting for the Application to sync"),
    ),
    # Argo CD reports a new Application Healthy before its first sync: not yet ours.
    "healthy-before-its-first-sync": (
        application("OutOfSync", "Healthy"),
        ("Progressing", "Waiting for the Application to sync"),
    ),
    "sync-running": (application("Synced", "Healthy", "Running"), ("Progressing", "Sync Running")),
    "synced-progressing": (
        application("Synced", "Progressing", "Succeeded"),
        ("Progressing", "Progressing message"),
    ),
    "synced-healthy": (
        application("Synced", "Healthy", "Succeeded"),
        ("Healthy", "Healthy message"),
    ),
    "degraded-even-out-of-sync": (
        application("OutOfSync", "Degraded", "Failed"),
        ("Degraded", "Degraded message"),
    ),
    "missing": (application("OutOfSync", "Missing"), ("Missing", "Missing message")),
    # Its sync failed (retries used up) and it is not at the desired state: the parent's
    # wave fails rather than waiting for ever.
    "sync-failed": (
        application("OutOfSync", "Healthy", "Failed"),
        ("Degraded", "Sync failed: Failed message"),
    ),
    "sync-error": (
        application("OutOfSync", "Healthy", "Error"),
        ("Degraded", "Sync failed: Error message"),
    ),
    # Still retrying: not yet decided.
    "sync-retrying": (
        application("OutOfSync", "Healthy", "Running"),
        ("Progressing", "Sync Running"),
    ),
    # A failed operation does not matter once the app is Synced again.
    "failed-then-synced": (
        application("Synced", "Healthy", "Failed"),
        ("Healthy", "Healthy message"),
    ),
    # The parent has just moved the child to a new version's folder: its status still
    # says Synced and Healthy, compared to the old folder. Not Healthy until compared anew.
    "stale-status-after-a-new-source": (
        moved(
            application("Synced", "Healthy", "Succeeded"), "dist/local/0.1.1", "dist/local/0.1.2"
        ),
        ("Progressing", "Waiting for the Application to compare its new source"),
    ),
    "compared-to-its-source": (
        moved(
            application("Synced", "Healthy", "Succeeded"), "dist/local/0.1.2", "dist/local/0.1.2"
        ),
        ("Healthy", "Healthy message"),
    ),
}


@pytest.mark.parametrize("case", APPLICATION_CASES, ids=list(APPLICATION_CASES))
def test_a_child_application_is_healthy_only_once_synced(case: str) -> None:
    obj, expected = APPLICATION_CASES[case]
    assert health(obj, APPLICATION_HEALTH_LUA) == expected


def crd(*conditions: tuple[str, str], deleting: bool = False) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "CustomResourceDefinition", "metadata": {"name": "x"}}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if conditions:
        obj["status"] = {
            "conditions": [{"type": t, "status": s, "message": f"{t} {s}"} for t, s in conditions]
        }
    return obj


CRD_CASES: dict[str, tuple[dict[str, Any], tuple[str, str]]] = {
    "new": (crd(), ("Progressing", "Waiting for the CRD to be established")),
    # Argo CD's own check says Degraded here, for the second until Established.
    "names-accepted-not-yet-established": (
        crd(("NamesAccepted", "True")),
        ("Progressing", "Waiting for the CRD to be established"),
    ),
    "established": (
        crd(("NamesAccepted", "True"), ("Established", "True")),
        ("Healthy", "CRD is established"),
    ),
    "names-refused": (
        crd(("NamesAccepted", "False")),
        ("Degraded", "CRD names not accepted: NamesAccepted False"),
    ),
    "not-structural": (
        crd(("NamesAccepted", "True"), ("Established", "True"), ("NonStructuralSchema", "True")),
        ("Degraded", "CRD schema is not structural: NonStructuralSchema True"),
    ),
    "terminating": (
        crd(("Established", "True"), deleting=True),
        ("Progressing", "CRD is terminating"),
    ),
}


@pytest.mark.parametrize("case", CRD_CASES, ids=list(CRD_CASES))
def test_a_crd_being_established_is_progressing_not_degraded(case: str) -> None:
    obj, expected = CRD_CASES[case]
    assert health(obj, CRD_HEALTH_LUA) == expected


def test_tracking_id_is_argo_cds_format() -> None:
    obj = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "tfjobs.kubeflow.org"},
    }
    assert tracking_id("local-crds", obj) == (
        "local-crds:apiextensions.k8s.io/CustomResourceDefinition:/tfjobs.kubeflow.org"
    )
    namespaced = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"},
    }
    assert tracking_id("app", namespaced) == "app:/ConfigMap:n/c"
