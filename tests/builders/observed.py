"""What the operator observes, for its unit tests: pods, Services, batch Jobs and jobs
(camelCase JSON, as the API server serves them, trimmed as the informers keep them)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from kubetrain.api import apply_defaults, load_job
from kubetrain.api import keys as K
from kubetrain.api.loader import Job
from tests.builders import jobs

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)
JOB_UID = "job-uid-1"


def stamp(seconds_ago: float = 0) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The metadata of the job the informers hold (the owner of the pods below).
OBSERVED = {"namespace": "ns", "uid": JOB_UID}


def pytorch_raw(
    *,
    workers: int = 2,
    master: bool = True,
    restart_policy: str = "OnFailure",
    run_policy: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    elastic: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if run_policy:
        spec["runPolicy"] = run_policy
    if elastic:
        spec["elasticPolicy"] = {"maxReplicas": workers}
    raw = jobs.pytorch_job(
        master=master,
        workers=workers,
        restart_policy=restart_policy,
        metadata={**OBSERVED, "resourceVersion": "7"},
        **spec,
    )
    if status:
        raw["status"] = copy.deepcopy(status)
    return raw


def tf_raw(
    *, chief: bool = False, workers: int = 2, ps: int = 0, success_policy: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {} if success_policy is None else {"successPolicy": success_policy}
    return jobs.tf_job(chief=chief, ps=ps, workers=workers, metadata=dict(OBSERVED), **spec)


def mpi_raw(*, workers: int = 2, slots: int = 2, **spec: Any) -> dict[str, Any]:
    return jobs.mpi_job(
        workers=workers, metadata=dict(OBSERVED), **{"slotsPerWorker": slots, **spec}
    )


def typed(raw: dict[str, Any]) -> Job:
    return apply_defaults(load_job({k: v for k, v in raw.items() if k != "status"}))


def pod(
    name: str,
    phase: str = "Running",
    *,
    ready: bool | None = None,
    uid: str | None = None,
    owner_uid: str = JOB_UID,
    restarts: int = 0,
    exit_code: int | None = None,
    reason: str | None = None,
    pod_reason: str | None = None,
    message: str = "",
    waiting: str | None = None,
    unschedulable: str | None = None,
    created_ago: float = 10,
    labels: dict[str, str] | None = None,
    last_exit: tuple[int, str] | None = None,
    deleting: bool = False,
    owner_kind: str = "PyTorchJob",
) -> dict[str, Any]:
    """A trimmed pod. ``ready`` defaults to True for Running pods."""
    is_ready = phase == "Running" if ready is None else ready
    state: dict[str, Any] = {"running": {"startedAt": stamp(created_ago)}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "reason": reason or "Error"}}
    if waiting is not None:
        state = {"waiting": {"reason": waiting, "message": message}}
    container: dict[str, Any] = {"name": "main", "restartCount": restarts, "state": state}
    if last_exit is not None:
        container["lastState"] = {
            "terminated": {"exitCode": last_exit[0], "reason": last_exit[1], "finishedAt": stamp()}
        }
    conditions = [{"type": "Ready", "status": "True" if is_ready else "False"}]
    if unschedulable is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if phase != "Pending" or waiting:
        status["containerStatuses"] = [container]
    if pod_reason:
        status["reason"] = pod_reason
        status["message"] = message
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "labels": labels or {},
        "creationTimestamp": stamp(created_ago),
        "ownerReferences": [{"kind": owner_kind, "uid": owner_uid, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = stamp()
    return {"kind": "Pod", "metadata": meta, "status": status}


def service(name: str, *, replica_index: bool = True, hash_: str | None = None) -> dict[str, Any]:
    labels = {K.REPLICA_INDEX: "0"} if replica_index else {}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-svc-{name}",
        "labels": labels,
    }
    if hash_:
        meta["annotations"] = {K.SPEC_HASH_ANNOTATION: hash_}
    return {"kind": "Service", "metadata": meta}


def batch_job(name: str, condition: str | None = None, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"active": 1}
    if condition:
        body = {
            "conditions": [
                {
                    "type": condition,
                    "status": "True",
                    "reason": status.pop("reason", ""),
                    "message": status.pop("message", ""),
                }
            ]
        }
    body.update(status)
    return {
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "status": body,
    }
