"""Suspend and resume (``runPolicy.suspend``).

A suspended job has no pods: its pods, Services and (MPI) launcher Job are deleted, the
Suspended condition is True and Running turns False; ``startTime`` stays as it was (as
upstream keeps it) and no deadline runs. The MPI SSH Secret and ConfigMap stay (the key
pair is generated once per job). On resume every child is built again from the
*current* spec (mpi-operator#687: launcher changes were ignored), Suspended turns False
with reason ``<Kind>Resumed``, and ``startTime`` is reset to the resume, restarting the
deadline clock.

While suspended, a replica's ``active`` count is its pods that have not ended, those
being deleted included: a Terminating pod still holds its node's GPUs, and Kueue releases
a job's quota as soon as no replica reports an active pod (``replicaStatuses[*].active``,
a TrainJob's ``jobsStatus[*].active``). Reporting 0 at the delete request would let
Kueue admit the next job onto GPUs still in use (kueue#1574).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kubetrain.api.common import ConditionStatus, ConditionType, ReplicaStatus, RunPolicy
from kubetrain.controller import conditions as C
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ChildRef, ConditionChange, Decision, ref
from kubetrain.controller.model import Observed
from kubetrain.controller.ownership import owned_by_batch_job
from kubetrain.controller.policies import goodput

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: Kinds of children deleted while a job is suspended (the PodGroup too, as upstream:
#: a resumed job's gang is formed again from its current spec; the HPA too, as upstream's
#: hpa.go: nothing is to be scaled while nothing runs).
SUSPENDED_KINDS = ("Pod", "Service", "Job", "PodGroup", "HorizontalPodAutoscaler")


def is_suspended(run_policy: RunPolicy | None) -> bool:
    """Whether ``runPolicy.suspend`` is true."""
    return bool(run_policy and run_policy.suspend)


def children_to_delete(observed: Observed, keep: Iterable[str] = ()) -> list[ChildRef]:
    """Every pod, Service and launcher Job of a suspended job."""
    kept = set(keep)
    out: list[ChildRef] = []
    for kind in SUSPENDED_KINDS:
        for name, obj in sorted(observed.by_kind(kind).items()):
            if name in kept or owned_by_batch_job(obj):
                continue
            out.append(ref(kind, obj))
    return [r for r in out if not r.deleting]


def _as_not_deleted(pod: Mapping[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "deletionTimestamp"}
    return {**pod, "metadata": metadata}


def lingering(draft: Draft) -> dict[str, ReplicaStatus]:
    """The replica statuses of a suspended job: ``active`` counts the pods that have not
    ended yet, whether or not their deletion was requested (see the module docs)."""
    if draft.job is None:
        return {}
    pods = {name: _as_not_deleted(pod) for name, pod in draft.observed.pods.items()}
    counted = draft.plugin.status(draft.job, dataclasses.replace(draft.observed, pods=pods))
    still = counted.replica_statuses or {}
    return {
        rt: st.model_copy(update={"active": (still[rt].active or 0) if rt in still else 0})
        for rt, st in draft.replica_statuses.items()
    }


def decide(draft: Draft) -> Decision | None:
    """A suspended job: Suspended True, Running and Restarting False, its pods gone;
    nothing else is decided. A resumed one: Suspended False, ``startTime`` now."""
    kind, name = draft.kind, draft.name
    if is_suspended(draft.run_policy):
        reason = R.lifecycle(kind, R.Verb.SUSPENDED)
        message = R.suspended(kind, name)
        stopped = lingering(draft)
        status: dict[str, Any] = {"replica_statuses": stopped}
        if not C.is_true(draft.current, ConditionType.SUSPENDED) and C.get(
            draft.current, ConditionType.RUNNING
        ):
            # A job that ran is stopped (Kueue's preemption, a person): a fault for its
            # goodput, open until it trains again.
            status["goodput"] = goodput.opened(draft)
        return Decision(
            conditions=[
                ConditionChange(ConditionType.SUSPENDED, ConditionStatus.TRUE, reason, message),
                *(
                    ConditionChange(c, ConditionStatus.FALSE, reason, message, in_place=True)
                    for c in (ConditionType.RUNNING, ConditionType.RESTARTING)
                ),
            ],
            delete=children_to_delete(draft.observed),
            status=status,
            final=True,
        )
    if C.is_true(draft.current, ConditionType.SUSPENDED):
        return Decision(
            conditions=[
                ConditionChange(
                    ConditionType.SUSPENDED,
                    ConditionStatus.FALSE,
                    R.lifecycle(kind, R.Verb.RESUMED),
                    R.resumed(kind, name),
                )
            ],
            status={"start_time": C.format_time(draft.ctx.now)},
        )
    return None
