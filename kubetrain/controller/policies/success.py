"""When a job has succeeded, per kind (upstream's rules, stated once here):

- PyTorchJob: the Master's pod succeeded; without a Master, every Worker's did (elastic
  jobs: any Worker's);
- TFJob: the Chief's (or Master's) pod succeeded; without one, Worker 0's, or every
  Worker's with ``successPolicy: AllWorkers``;
- MPIJob: the launcher Job is Complete (and Failed when the launcher Job Failed, with the
  Job's reason and the last launcher pod's exit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.api.common import ConditionType
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.plugins.base import Observed, Outcome, Replica

Obj = Mapping[str, Any]


def _done(replica: Replica, observed: Observed) -> bool:
    pod = observed.pods.get(replica.pod_name)
    return pod is not None and podstate.is_succeeded(pod)


def _success(kind: str, name: str, detail: str, at: str | None = None) -> Outcome:
    return Outcome(
        ConditionType.SUCCEEDED,
        R.lifecycle(kind, R.Verb.SUCCEEDED),
        R.succeeded(kind, name, detail),
        at=at,
    )


def pytorch(
    job_name: str, replicas: Sequence[Replica], observed: Observed, *, elastic: bool
) -> Outcome | None:
    """PyTorchJob: the Master succeeded; without one every Worker (elastic: any)."""
    masters = [r for r in replicas if r.replica_type == "Master"]
    workers = [r for r in replicas if r.replica_type == "Worker"]
    if masters:
        if all(_done(r, observed) for r in masters):
            return _success("PyTorchJob", job_name, f"{masters[0].pod_name} completed")
        return None
    if workers and all(_done(r, observed) for r in workers):
        return _success("PyTorchJob", job_name, f"all {len(workers)} workers completed")
    if elastic:
        first = next((r for r in workers if _done(r, observed)), None)
        if first is not None:
            return _success("PyTorchJob", job_name, f"{first.pod_name} completed (elastic)")
    return None


def tensorflow(
    job_name: str, replicas: Sequence[Replica], observed: Observed, *, all_workers: bool
) -> Outcome | None:
    """TFJob: the Chief/Master succeeded; else Worker 0 (AllWorkers: every Worker)."""
    chiefs = [r for r in replicas if r.replica_type in ("Chief", "Master")]
    if chiefs:
        if _done(chiefs[0], observed):
            return _success("TFJob", job_name, f"{chiefs[0].pod_name} completed")
        return None
    workers = [r for r in replicas if r.replica_type == "Worker"]
    if not workers:
        return None
    if all_workers:
        if all(_done(r, observed) for r in workers):
            return _success("TFJob", job_name, f"all {len(workers)} workers completed")
        return None
    if _done(workers[0], observed):
        return _success("TFJob", job_name, f"{workers[0].pod_name} completed")
    return None


def _true_condition(batch_job: Obj | None, kind: str) -> Obj | None:
    for cond in ((batch_job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            found: Obj = cond
            return found
    return None


def mpi(job_name: str, launcher_job: Obj | None, launcher_pods: Sequence[Obj]) -> Outcome | None:
    """MPIJob: the launcher Job's Complete or Failed condition."""
    launcher = f"{job_name}-launcher"
    if _true_condition(launcher_job, "Complete") is not None:
        at = ((launcher_job or {}).get("status") or {}).get("completionTime")
        return _success(
            "MPIJob", job_name, f"launcher Job {launcher} completed", str(at or "") or None
        )
    failed = _true_condition(launcher_job, "Failed")
    if failed is None:
        return None
    detail = str(failed.get("message") or "the launcher Job failed")
    failed_pods = [p for p in launcher_pods if podstate.is_failed(p)]
    if failed_pods:
        detail += f"; last launcher pod: {podstate.failure(failed_pods[-1]).describe()}"
    return Outcome(
        ConditionType.FAILED,
        str(failed.get("reason") or R.lifecycle("MPIJob", R.Verb.FAILED)),
        f"launcher Job {launcher} failed: {detail}",
    )
