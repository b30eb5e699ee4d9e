"""Whole-gang restarts (user issue [2]: trainer#2000, #2269): under restart scope
``Gang`` a retryable failure of any pod restarts every pod of the job, so ranks that hit
NCCL timeouts at different moments re-form one group instead of never meeting again.

Scope: a v1 job annotated ``kubetrain.dev/restart-scope: Gang`` (limit:
``runPolicy.backoffLimit``), or a TrainJob whose runtime has JobSet's
``failurePolicy.maxRestarts`` (limit: that), as upstream restarts the whole JobSet.

Every pod carries the gang's attempt (label ``kubetrain.dev/attempt``, environment
``KUBETRAIN_RESTART_ATTEMPT``; torchrun's ``PET_RDZV_ID`` names it too), and its
restartPolicy is ``Never``, so no rank restarts alone in place. When a pod of the current
attempt fails:

1. the status records the next attempt and the failed pod's uid (written before anything
   is deleted: an operator killed after this step neither counts the failure again nor
   loses it);
2. every pod of an older attempt (and an MPI launcher Job) is deleted, and nothing is
   created while any of them still exists;
3. once they are all gone the build creates the whole gang again under the new attempt,
   with a fresh rendezvous.

Each gang restart counts once against the limit; a failure the replica's restart policy
does not retry (``Never``, an ``ExitCode`` verdict 1-127) fails the job as before. An
infrastructure failure (evicted, preempted, node lost, ``DisruptionTarget``) restarts the
gang whatever the policy and counts against the job's infrastructure budget instead
(``kubetrain.dev/infrastructure-restart-limit``; ``status.gangRestart.infrastructure``
holds how many attempts it started), as in ``policies/restart``.

Infrastructure failures restart the gang **whatever the job's own scope**: ranks of a DDP,
MPI or TrainJob gang cannot go on without the lost one (they wait in their collective),
so a job whose pod was evicted or lost with its node starts again as a whole, on healthy
nodes, with a fresh rendezvous. Elastic jobs (a PyTorchJob's ``elasticPolicy``, an elastic
TrainJob runtime) re-form without it, so they recreate only the pod; a job annotated
``kubetrain.dev/infrastructure-restart-scope: Pod`` does too. The program's own failures
then follow the job's scope (``policies/restart`` under ``Pod``). Once a gang restart
happened, every pod carries the attempt and ``KUBETRAIN_RESTART_REASON`` (the failed
pod's reason) in its environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.api.common import ConditionStatus, ConditionType, GangRestartStatus
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.controller import conditions as C
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import (
    INFRASTRUCTURE_METRIC,
    ChildRef,
    ConditionChange,
    Decision,
    Event,
    ref,
)
from kubetrain.controller.model import Outcome
from kubetrain.controller.ownership import owned_by_batch_job
from kubetrain.controller.policies import goodput
from kubetrain.controller.policies.restart import (
    WHOLE_NUMBER,
    infrastructure_limit,
    invalid_annotation,
    retryable,
)
from kubetrain.frameworks.pytorch import trainjob_elastic

if TYPE_CHECKING:
    from kubetrain.api.common import JobBase
    from kubetrain.controller.draft import Draft

#: How soon to look again while the old gang's pods are going away.
POLL_SECONDS = 1.0


def scope(job: JobBase) -> tuple[bool, str | None]:
    """(whether the job restarts as a gang, the annotation's value when it is invalid)."""
    if isinstance(job, ResolvedTrainJob):
        return job.spec.gang_max_restarts is not None, None
    value = (job.metadata.annotations or {}).get(K.RESTART_SCOPE_ANNOTATION)
    if value is None or value == "Pod":
        return False, None
    if value == "Gang":
        return True, None
    return False, value


def _elastic(job: JobBase) -> bool:
    """Whether the job's ranks re-form without a lost one (torch elastic)."""
    if isinstance(job, ResolvedTrainJob):
        return trainjob_elastic(job) is not None
    return getattr(getattr(job, "spec", None), "elastic_policy", None) is not None


def infrastructure_scope(job: JobBase) -> tuple[bool, str | None]:
    """(whether an infrastructure failure restarts the job's gang, the annotation's value
    when it is invalid). Default: a gang, but for elastic jobs."""
    value = (job.metadata.annotations or {}).get(K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION)
    if value is None:
        return not _elastic(job), None
    if value in K.RESTART_SCOPES:
        return value == "Gang", None
    return False, value


def restarted(job: JobBase, state: GangRestartStatus | None) -> bool:
    """Whether the job's pods carry a gang attempt: under scope Gang always, else once an
    infrastructure failure restarted the gang."""
    return scope(job)[0] or (state is not None and state.attempt > 0)


def limit_of(job: JobBase) -> int | None:
    """The number of gang restarts the job may use (None: no limit)."""
    if isinstance(job, ResolvedTrainJob):
        return job.spec.gang_max_restarts
    return job.run_policy.backoff_limit if job.run_policy else None


def attempt_of(obj: Mapping[str, Any]) -> int:
    """The attempt a pod (or launcher Job) belongs to: its label, 0 when absent."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    try:
        return int(labels.get(K.ATTEMPT_LABEL, "0"))
    except ValueError:
        return -1


def with_attempt(
    job: JobBase,
    attempt: int,
    built: list[dict[str, Any]],
    *,
    reason: str | None = None,
    never: bool = True,
) -> None:
    """Put the attempt on every pod (and launcher Job template) of ``built``, in place:
    the label, the environment (with ``reason``, why the attempt started), torchrun's
    rendezvous id, and (``never``: the job's scope is Gang) restartPolicy ``Never``."""
    for child in built:
        if child["kind"] == "Pod":
            pod = child
        elif child["kind"] == "Job":
            pod = child["spec"]["template"]
            child["metadata"].setdefault("labels", {})[K.ATTEMPT_LABEL] = str(attempt)
        else:
            continue
        pod.setdefault("metadata", {}).setdefault("labels", {})[K.ATTEMPT_LABEL] = str(attempt)
        spec = pod.setdefault("spec", {})
        if child["kind"] == "Pod" and never:
            spec["restartPolicy"] = "Never"
        for container in spec.get("containers") or []:
            env = container.setdefault("env", [])
            names = {e.get("name") for e in env}
            env.append({"name": K.ATTEMPT_ENV, "value": str(attempt)})
            if reason:
                env.append({"name": K.RESTART_REASON_ENV, "value": reason})
            if E.PET_NNODES in names and E.PET_RDZV_ID not in names:
                env.append({"name": E.PET_RDZV_ID, "value": f"{job.name}-{attempt}"})


def decide(draft: Draft) -> Decision | None:
    """Start a gang restart, or finish one in progress (see the module docs); None when
    neither the job's scope nor an infrastructure failure restarts its gang."""
    job = draft.job
    assert job is not None
    gang, invalid = scope(job)
    if invalid is not None:
        scopes = " or ".join(K.RESTART_SCOPES)
        return invalid_annotation(K.RESTART_SCOPE_ANNOTATION, invalid, scopes)
    infra_gang, invalid = infrastructure_scope(job)
    if invalid is not None:
        scopes = " or ".join(K.RESTART_SCOPES)
        return invalid_annotation(K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION, invalid, scopes)
    state = draft.current.gang_restart or GangRestartStatus(attempt=0)
    if not (gang or infra_gang or state.attempt):
        return None
    infra_limit, invalid = infrastructure_limit(job)
    if invalid is not None:
        key = K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION
        return invalid_annotation(key, invalid, WHOLE_NUMBER)
    attempt = state.attempt
    limit = limit_of(job)
    infra_used = state.infrastructure or 0
    observed = draft.observed
    replicas = {r.pod_name: r for r in draft.plugin.replicas(job)}
    for name, pod in sorted(observed.pods.items()):
        replica = replicas.get(name)
        # An MPI launcher's pod (its batch Job's) counts when its node fails it.
        launcher = replica is None and owned_by_batch_job(pod)
        if not (replica or launcher) or attempt_of(pod) != attempt:
            continue
        # A pod being evicted (a drain) ends the attempt as soon as it is marked.
        if not (podstate.is_failed(pod) or podstate.is_disrupted(pod)):
            continue
        uid = podstate.uid(pod)
        if uid == state.trigger:
            continue
        cause = podstate.failure(pod, replica.main_container if replica else None)
        infrastructure = podstate.is_disruption(cause)
        if not (infra_gang if infrastructure else gang and replica is not None):
            continue  # the pod alone is recreated (policies/restart, or its batch Job)
        replica_type = replica.replica_type if replica else "Launcher"
        if (
            replica is not None
            and not infrastructure
            and not retryable(replica.restart_policy, cause)
        ):
            message = R.pod_failed(
                draft.kind,
                draft.name,
                replica.replica_type,
                name,
                cause.describe(),
                replica.restart_policy.value,
            )
            return Decision(
                outcome=Outcome(
                    ConditionType.FAILED,
                    R.lifecycle(draft.kind, R.Verb.FAILED),
                    message,
                    replica_type=replica.replica_type,
                )
            )
        program_used = attempt - infra_used  # the gang restarts the program's failures made
        if infrastructure and infra_used + 1 > infra_limit:
            message = R.infrastructure_restarts_exceeded(
                draft.kind, draft.name, replica_type, name, cause.describe(), infra_limit
            )
            reason = K.INFRASTRUCTURE_RESTART_LIMIT_EXCEEDED
        elif not infrastructure and limit is not None and program_used + 1 > limit:
            message = R.gang_restarts_exceeded(
                draft.kind, draft.name, name, cause.describe(), limit
            )
            reason = K.BACKOFF_LIMIT_EXCEEDED
        else:
            message, reason = "", ""
        if message:
            return Decision(
                outcome=Outcome(ConditionType.FAILED, reason, message, replica_type=replica_type)
            )
        if infrastructure:
            infra_used += 1
            text = R.gang_infrastructure_restarting(
                draft.kind, draft.name, name, cause.describe(), attempt + 1, infra_used, infra_limit
            )
        else:
            text = R.gang_restarting(
                draft.kind, draft.name, name, cause.describe(), attempt + 1, program_used + 1, limit
            )
        redo = goodput.steps_to_redo(draft.status)
        if redo is not None:
            text = f"{text} {R.resume_point(*redo)}"
        next_state = GangRestartStatus(
            attempt=attempt + 1,
            trigger=uid,
            infrastructure=infra_used or None,
            reason=cause.reason or None,
            since=C.format_time(draft.ctx.now),
            hangs=state.hangs,
        )
        return Decision(
            status={"gang_restart": next_state, "goodput": goodput.opened(draft)},
            delete=older_than(attempt + 1, draft),
            conditions=[_restarting(draft, text)],
            events=[Event("Warning", R.GANG_RESTART, text, key=f"gang-restart/{uid}")],
            metrics=[f"{INFRASTRUCTURE_METRIC}{cause.reason}" if infrastructure else "restarted"],
            final=True,
            requeue_after=POLL_SECONDS,
        )
    stale = older_than(attempt, draft, include_deleting=True)
    if stale:
        # The old gang is going: nothing new until every one of its pods is gone.
        return Decision(
            delete=[r for r in stale if not r.deleting], final=True, requeue_after=POLL_SECONDS
        )
    return None


def _restarting(draft: Draft, text: str) -> ConditionChange:
    return ConditionChange(
        ConditionType.RESTARTING,
        ConditionStatus.TRUE,
        R.lifecycle(draft.kind, R.Verb.RESTARTING),
        text,
        event=None,
    )


def older_than(attempt: int, draft: Draft, *, include_deleting: bool = False) -> list[ChildRef]:
    """Pods and launcher Jobs of an attempt before ``attempt`` (launcher pods go with
    their Job)."""
    out: list[ChildRef] = []
    for kind in ("Pod", "Job"):
        for _name, obj in sorted(draft.observed.by_kind(kind).items()):
            if kind == "Pod" and owned_by_batch_job(obj):
                continue
            if attempt_of(obj) < attempt:
                child = ref(kind, obj)
                if include_deleting or not child.deleting:
                    out.append(child)
    return out
