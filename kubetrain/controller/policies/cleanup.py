"""What is deleted when a job reaches its final state, and when.

An explicitly set ``runPolicy.cleanPodPolicy`` behaves as upstream documents it, on every
final state (success, failure, deadline, backoff, startup timeout):

- ``All``: every pod and Service goes, and an MPI launcher Job;
- ``Running``: the pods still Pending or Running go, with their per-replica Services, and
  an MPI launcher Job that is still active;
- ``None``: nothing is deleted; pods still running run on.

Left unset, kubetrain's default differs from upstream's (``None``) so that no pod holds
GPUs after its job ended (trainer#1982, kueue#1574, mpi-operator#647):

- after a failure, the pods still active are deleted at once (as under ``Running``);
- after a success, ranks still running get a grace period to exit by themselves (the
  operator's ``--success-grace-seconds``, or the job's ``kubetrain.dev/success-grace-
  seconds`` annotation), so late ranks finish their shutdown and keep their logs; what
  is still active then is deleted. Pods that never end by themselves (MPI workers
  running ``sshd``) get no grace.

Finished pods are kept (their logs can be read, mpi-operator#461) except under ``All``.
After the end the status keeps counting the pods as what they are: a rank that exits by
itself later is counted succeeded or failed then, and a rank stopped by the cleanup is
never counted as succeeded. ``ttlSecondsAfterFinished`` deletes the job; as upstream, an
MPIJob's TTL deletes its launcher Job and a TrainJob's its pods and Services, the job and
its status staying.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kubetrain.api import keys as K
from kubetrain.api.common import CleanPodPolicy, ConditionType, ReplicaStatus
from kubetrain.controller import conditions as C
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ChildRef, Decision, Event, ref, soonest
from kubetrain.controller.model import Observed
from kubetrain.controller.ownership import owned_by_batch_job
from kubetrain.controller.policies import deadlines

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

Obj = Mapping[str, Any]


def declared_policy(draft: Draft) -> CleanPodPolicy | None:
    """The job's ``cleanPodPolicy`` as written (None: unset, kubetrain's default)."""
    return draft.loaded.declared_clean_pod_policy


def grace_seconds(raw: Mapping[str, Any], default: int) -> int:
    """How long ranks may run on after a success: the job's annotation when it is a
    non-negative integer, else the operator's setting."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(K.SUCCESS_GRACE_ANNOTATION)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return default


def _job_active(batch_job: Obj) -> bool:
    for cond in (batch_job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return False
    return True


def children_to_delete(
    policy: CleanPodPolicy, observed: Observed, *, spare: frozenset[str] = frozenset()
) -> list[ChildRef]:
    """The children to delete under ``policy`` (``spare``: active pods left running for
    now, with their Services)."""
    if policy is CleanPodPolicy.NONE:
        return []
    out: list[ChildRef] = []
    deleted_pods: set[str] = set()
    for name, pod in sorted(observed.pods.items()):
        if owned_by_batch_job(pod):
            continue  # launcher pods go with their Job
        if policy is CleanPodPolicy.ALL or (podstate.is_active(pod) and name not in spare):
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


def _in_grace(
    draft: Draft, succeeded: bool, completion_time: str | None
) -> tuple[frozenset[str], float | None]:
    """Under the default policy after a success: the active pods still within their
    grace period, and the seconds until it ends (None when none is)."""
    if not succeeded or draft.job is None:
        return frozenset(), None
    end = C.parse_time(completion_time) or draft.ctx.now
    left = (
        end
        + timedelta(seconds=grace_seconds(draft.raw, draft.ctx.success_grace_seconds))
        - draft.ctx.now
    ).total_seconds()
    if left <= 0:
        return frozenset(), None
    serving = {
        r.pod_name
        for r in draft.plugin.replicas(draft.job)
        if r.replica_type in draft.plugin.serving_replica_types(draft.job)
    }
    spare = frozenset(
        name
        for name, pod in draft.observed.pods.items()
        if podstate.is_active(pod) and name not in serving
    )
    return spare, (left + deadlines.SLACK_SECONDS) if spare else None


def at_end(
    draft: Draft, succeeded: bool, completion_time: str | None
) -> tuple[list[ChildRef], float | None]:
    """What to delete now that the job has ended at ``completion_time`` (or this
    reconcile of a job that had), and when to look again for ranks still in their grace
    period."""
    # The PodGroup goes whatever the policy: nothing is left to place together; and the
    # HPA: nothing is left to scale.
    groups = [ref("PodGroup", g) for g in draft.observed.pod_groups.values()]
    groups += [ref("HorizontalPodAutoscaler", a) for a in draft.observed.autoscalers.values()]
    groups = [g for g in groups if not g.deleting]
    declared = declared_policy(draft)
    if declared is not None:
        return children_to_delete(declared, draft.observed) + groups, None
    spare, after = _in_grace(draft, succeeded, completion_time)
    return children_to_delete(CleanPodPolicy.RUNNING, draft.observed, spare=spare) + groups, after


def counts_after_end(
    recorded: Mapping[str, ReplicaStatus] | None, counted: Mapping[str, ReplicaStatus]
) -> dict[str, ReplicaStatus] | None:
    """A finished job's replica counts: active as observed; succeeded and failed as
    observed, never fewer than recorded (deleted pods keep their verdict)."""
    if recorded is None and not counted:
        return None
    out: dict[str, ReplicaStatus] = dict(recorded or {})
    for rtype, now in counted.items():
        before = out.get(rtype)
        if before is None:
            out[rtype] = now
            continue
        out[rtype] = before.model_copy(
            update={
                "active": now.active or 0,
                "succeeded": max(before.succeeded or 0, now.succeeded or 0),
                "failed": max(before.failed or 0, now.failed or 0),
            }
        )
    for rtype, before in list(out.items()):
        if rtype not in counted and before.active:
            out[rtype] = before.model_copy(update={"active": 0})
    return out


def decide_finished(draft: Draft) -> Decision | None:
    """A job that already ended: its cleanup (see the module docs), its counts kept true,
    and the job deleted once ``ttlSecondsAfterFinished`` has passed (None: the job has
    not ended)."""
    if not draft.finished:
        return None
    succeeded = C.finished(draft.current) is ConditionType.SUCCEEDED
    delete, grace_after = at_end(draft, succeeded, draft.status.completion_time)
    decision = Decision(final=True, delete=delete, requeue_after=grace_after)
    if draft.job is not None:
        counted = draft.plugin.status(draft.job, draft.observed).replica_statuses or {}
        counts = counts_after_end(draft.current.replica_statuses, counted)
        if counts is not None:
            decision.status = {"replica_statuses": counts}
    ttl = deadlines.ttl_after_finished(draft.run_policy, draft.current, draft.ctx.now)
    if ttl.due:
        target = draft.plugin.ttl_deletes
        if target != "job":
            kept = {(r.kind, r.name) for r in decision.delete}
            gone = (
                children_to_delete(CleanPodPolicy.ALL, draft.observed)
                if target == "children"
                else [ref("Job", j) for j in draft.observed.batch_jobs.values()]
            )
            decision.delete += [r for r in gone if not r.deleting and (r.kind, r.name) not in kept]
        else:
            decision.delete_job = True
            decision.events.append(
                Event(
                    "Normal",
                    R.TTL_EXPIRED,
                    f"{draft.kind} {draft.name} finished and its TTL passed",
                )
            )
    else:
        decision.requeue_after = soonest(grace_after, ttl.after)
    return decision
