"""Per-replica restart limits (``kubetrain.dev/max-restarts`` on a replica's pod
template) alongside the job-wide backoffLimit."""

from __future__ import annotations

from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.decisions import Context
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from tests.builders.observed import NOW, pod, pytorch_raw, stamp

PLUGINS = build_registry(("PyTorchJob",))


def job(worker_restarts: int) -> dict[str, Any]:
    raw = pytorch_raw(workers=2, restart_policy="OnFailure", run_policy={"backoffLimit": 10})
    template = raw["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    template["metadata"] = {"annotations": {K.MAX_RESTARTS_ANNOTATION: "1"}}
    raw["status"] = {
        "conditions": [{"type": "Running", "status": "True", "reason": "PyTorchJobRunning"}],
        "startTime": stamp(60),
        "replicaStatuses": {"Worker": {"active": 2, "restarts": worker_restarts}},
    }
    return raw


def failed_worker() -> Observed:
    return Observed(
        now=NOW,
        pods={
            "job-master-0": pod("job-master-0"),
            "job-worker-0": pod("job-worker-0", "Failed", exit_code=137, uid="w0"),
            "job-worker-1": pod("job-worker-1"),
        },
    )


def condition(status: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in (status or {}).get("conditions") or [] if c["type"] == kind), None)


def test_a_replica_type_restarts_up_to_its_own_limit() -> None:
    first = plan(job(0), PLUGINS["PyTorchJob"], failed_worker(), Context(now=NOW))
    assert [r.name for r in first.delete] == ["job-worker-0"]
    assert condition(first.status, "Failed") is None
    # One restart used of the Worker's 1, far below backoffLimit 10: the job fails.
    second = plan(job(1), PLUGINS["PyTorchJob"], failed_worker(), Context(now=NOW))
    failed = condition(second.status, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert (
        "(kubetrain.dev/max-restarts 1) are used up: pod job-worker-0 failed" in failed["message"]
    )


def test_an_eviction_is_not_counted_against_the_replica_types_limit() -> None:
    """The Worker's one restart is used; its eviction is the infrastructure's, recreated
    against the job's infrastructure budget, neither max-restarts nor backoffLimit."""
    evicted = Observed(
        now=NOW,
        pods={
            "job-master-0": pod("job-master-0"),
            "job-worker-0": pod("job-worker-0", "Failed", pod_reason="Evicted", uid="w0"),
            "job-worker-1": pod("job-worker-1"),
        },
    )
    raw = job(1)
    # Pod scope for infrastructure failures too (the default restarts the gang).
    raw["metadata"]["annotations"] = {K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION: "Pod"}
    planned = plan(raw, PLUGINS["PyTorchJob"], evicted, Context(now=NOW))
    assert [r.name for r in planned.delete] == ["job-worker-0"]
    assert condition(planned.status, "Failed") is None
    assert planned.status is not None
    worker = planned.status["replicaStatuses"]["Worker"]
    assert (worker["restarts"], worker["infrastructureRestarts"]) == (1, 1)
