"""What is deleted when a job reaches its final state (every terminal path: success,
failure, deadline, backoff, startup timeout).

kubetrain never leaves a pod running after the job ended (upstream did with the default
``cleanPodPolicy: None``: trainer#1982, kueue#1574, mpi-operator#647), so on every final
state the pods still Pending or Running are deleted, with their Services and an MPI
launcher Job that is still active. ``cleanPodPolicy`` decides about the rest:

- ``All``: every pod, Service and the launcher Job go too;
- ``Running`` and ``None`` (the default): finished pods are kept so their logs can be read
  (mpi-operator#461), and so are their Services.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubetrain.api import keys as K
from kubetrain.api.common import CleanPodPolicy, RunPolicy
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ChildRef, Decision, Event, ref
from kubetrain.controller.plugins.base import Observed
from kubetrain.controller.policies import deadlines

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

Obj = Mapping[str, Any]


def clean_pod_policy(run_policy: RunPolicy | None) -> CleanPodPolicy:
    """The job's cleanPodPolicy (None when unset, as defaulting does)."""
    return (run_policy.clean_pod_policy if run_policy else None) or CleanPodPolicy.NONE


def _job_active(batch_job: Obj) -> bool:
    for cond in (batch_job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return False
    return True


def children_to_delete(policy: CleanPodPolicy, observed: Observed) -> list[ChildRef]:
    """The children to delete for a finished job under ``policy``."""
    out: list[ChildRef] = []
    deleted_pods: set[str] = set()
    for name, pod in sorted(observed.pods.items()):
        owned_by_job = any(
            o.get("kind") == "Job" for o in (pod.get("metadata") or {}).get("ownerReferences") or []
        )
        if owned_by_job:
            continue  # launcher pods go with their Job
        if policy is CleanPodPolicy.ALL or podstate.is_active(pod):
            out.append(ref("Pod", pod))
            deleted_pods.add(name)
    for name, service in sorted(observed.services.items()):
        labels = (service.get("metadata") or {}).get("labels") or {}
        per_pod = K.REPLICA_INDEX in labels
        if policy is CleanPodPolicy.ALL or (per_pod and name in deleted_pods):
            out.append(ref("Service", service))
    for _name, batch_job in sorted(observed.batch_jobs.items()):
        if policy is CleanPodPolicy.ALL or _job_active(batch_job):
            out.append(ref("Job", batch_job))
    return [r for r in out if not r.deleting]


def decide_finished(draft: Draft) -> Decision | None:
    """A job that already ended is only cleaned up, and deleted once its
    ``ttlSecondsAfterFinished`` has passed (None: the job has not ended)."""
    if not draft.finished:
        return None
    policy = clean_pod_policy(draft.run_policy)
    decision = Decision(final=True, delete=children_to_delete(policy, draft.observed))
    ttl = deadlines.ttl_after_finished(draft.run_policy, draft.current, draft.ctx.now)
    if ttl.due:
        decision.delete_job = True
        decision.events.append(
            Event("Normal", R.TTL_EXPIRED, f"{draft.kind} {draft.name} finished and its TTL passed")
        )
    decision.requeue_after = ttl.after
    return decision
