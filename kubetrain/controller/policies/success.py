"""When a job has succeeded: the framework's success rule (``kubetrain.frameworks``),
answered from the job's pods, turned into the Succeeded outcome. MPIJob's launcher is a
batch Job, so its Complete condition answers "the launcher succeeded", and its Failed
condition ends the job with the Job's reason and the last launcher pod's exit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubetrain.api.common import ConditionType, JobBase
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import Decision
from kubetrain.controller.model import Observed, Outcome
from kubetrain.frameworks import Framework, replica_name
from kubetrain.frameworks import mpi as mpi_framework

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

Obj = Mapping[str, Any]


def decide(draft: Draft) -> Decision | None:
    """End the job when its plugin says it ended (the framework's success rule; MPI's
    launcher Job also fails it)."""
    assert draft.job is not None
    outcome = draft.plugin.outcome(draft.job, draft.observed)
    return Decision(outcome=outcome) if outcome is not None else None


def _success(kind: str, name: str, detail: str, at: str | None = None) -> Outcome:
    return Outcome(
        ConditionType.SUCCEEDED,
        R.lifecycle(kind, R.Verb.SUCCEEDED),
        R.succeeded(kind, name, detail),
        at=at,
    )


def from_pods(
    framework: Framework,
    job: JobBase,
    observed: Observed,
    pod_name: Callable[[str, str, int], str] = replica_name,
) -> Outcome | None:
    """Succeeded when the framework's rule holds for the pods that succeeded
    (``pod_name(job, replica type, index)`` names them)."""

    def done(replica_type: str, index: int) -> bool:
        pod = observed.pods.get(pod_name(job.name, replica_type, index))
        return pod is not None and podstate.is_succeeded(pod)

    detail = framework.succeeded(job, done)
    return _success(job.kind, job.name, detail) if detail is not None else None


def _true_condition(batch_job: Obj | None, kind: str) -> Obj | None:
    for cond in ((batch_job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            found: Obj = cond
            return found
    return None


def mpi(job: JobBase, launcher_job: Obj | None, launcher_pods: Sequence[Obj]) -> Outcome | None:
    """MPIJob: the framework's rule, with the launcher Job's Complete condition saying
    the launcher succeeded; its Failed condition fails the job."""
    job_name = job.name
    launcher = f"{job_name}-launcher"
    complete = _true_condition(launcher_job, "Complete") is not None
    detail = mpi_framework.FRAMEWORK.succeeded(
        job, lambda rtype, _index: complete and rtype == mpi_framework.LAUNCHER
    )
    if detail is not None:
        at = ((launcher_job or {}).get("status") or {}).get("completionTime")
        return _success(job.kind, job_name, detail, str(at or "") or None)
    failed = _true_condition(launcher_job, "Failed")
    if failed is None:
        return None
    detail = str(failed.get("message") or "the launcher Job failed")
    failed_pods = [p for p in launcher_pods if podstate.is_failed(p)]
    if failed_pods:
        detail += f"; last launcher pod: {podstate.failure(failed_pods[-1]).describe()}"
    return Outcome(
        ConditionType.FAILED,
        str(failed.get("reason") or R.lifecycle(job.kind, R.Verb.FAILED)),
        R.launcher_failed(job.kind, job_name, launcher, detail),
    )
