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
from dataclasses import dataclass
from typing import Any

from kubetrain.api.common import CleanPodPolicy, RunPolicy
from kubetrain.controller import podstate
from kubetrain.controller.plugins.base import Observed

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class ChildRef:
    """A child to delete, with the uid it must still have (a precondition)."""

    kind: str
    name: str
    uid: str
    deleting: bool = False


def ref(kind: str, obj: Obj) -> ChildRef:
    """A ChildRef for ``obj`` (its name, uid and whether it is being deleted)."""
    return ChildRef(kind, podstate.name(obj), podstate.uid(obj), podstate.is_deleting(obj))


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
        per_pod = "training.kubeflow.org/replica-index" in labels
        if policy is CleanPodPolicy.ALL or (per_pod and name in deleted_pods):
            out.append(ref("Service", service))
    for _name, batch_job in sorted(observed.batch_jobs.items()):
        if policy is CleanPodPolicy.ALL or _job_active(batch_job):
            out.append(ref("Job", batch_job))
    return [r for r in out if not r.deleting]
