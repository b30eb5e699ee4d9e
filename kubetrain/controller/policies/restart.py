"""One restart model for every kind (user issue [1]: trainer#2044, #2045, #2200).

Per replica ``restartPolicy``:

- ``Never``: a failed pod fails the job (reason ``<Kind>Failed``, or ``<Kind>Evicted``
  when it was evicted or preempted).
- ``ExitCode``: pods run with restartPolicy Never; a pod whose container exited with a
  code >= 128 (killed by a signal: OOM, preemption) or that was evicted is deleted and
  recreated; a code 1-127 is the program's own verdict and fails the job.
- ``OnFailure`` / ``Always``: the kubelet restarts containers in place; a pod that fails
  as a whole (evicted, node lost) is deleted and recreated.

An infrastructure failure is not the program's: a pod evicted (a drain, the Eviction API,
the kubelet's node-pressure eviction), preempted, lost with its node, or marked
``DisruptionTarget`` is recreated whatever its restartPolicy (``Never`` included, as
batch/v1's ``podFailurePolicy`` ``Ignore`` on ``DisruptionTarget`` does for Jobs), counted
in ``replicaStatuses[*].infrastructureRestarts`` against the job's own budget
(``kubetrain.dev/infrastructure-restart-limit``, default 10), never against
``backoffLimit`` or ``kubetrain.dev/max-restarts``; past the budget the job fails
(``InfrastructureRestartLimitExceeded``), so a flapping cluster cannot restart it forever.

``runPolicy.backoffLimit`` is the number of restarts the job may use, counting both
the pods the operator recreated (kept in ``replicaStatuses[*].restarts``, so they survive
pod deletion) and the in-place container restarts of the current pods. A failure that
would exceed it fails the job with ``BackoffLimitExceeded``; unset means no limit.
Every decision ends in either a recreation or a final state: nothing stays Restarting.

Each restart gets one Event, numbered against the limit ("restarts used: 2 of 2"): the
in-place restarts the operator had not seen yet come one by one, a ``restartCount`` step
each (two steps between two looks are two restarts), then the recreations. (Of a pod it
never looked at, after an operator restart, only the latest restart is news.) The restart
that would exceed the limit is the ``BackoffLimitExceeded`` failure and nothing else, so
no message ever shows more restarts used than allowed.

Counting is idempotent across operator crashes: the uid of a failed pod counted now is
written with the count (``replicaStatuses[*].countedFailures``) in the status write that
comes *before* the pod's deletion, and dropped once no pod of that uid is left. An
operator killed after that write and before (or after) the deletion finds the uid in the
status and recreates the pod without counting it again; one killed before the write
finds neither the count nor the uid, and counts the failure once.

``policies/failure`` asks :func:`evaluate` (or ``batch_restart``) for the verdict and ends
the job on a failure; :func:`decide_recreate` here deletes the pods the verdict recreates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kubetrain.api import keys as K
from kubetrain.api.common import ConditionStatus, ConditionType, RestartPolicy
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import (
    INFRASTRUCTURE_METRIC,
    ConditionChange,
    Decision,
    Event,
    ref,
)
from kubetrain.controller.model import (
    InPlaceRestart,
    Observed,
    Outcome,
    Recreate,
    Replica,
    RestartVerdict,
)
from kubetrain.controller.podstate import Termination

if TYPE_CHECKING:
    from kubetrain.api.common import JobBase
    from kubetrain.controller.draft import Draft


def retryable(policy: RestartPolicy, cause: Termination) -> bool:
    """Whether a pod that failed with ``cause`` is recreated under ``policy``."""
    if policy is RestartPolicy.NEVER:
        return False
    if policy is RestartPolicy.EXIT_CODE:
        if cause.exit_code is None:
            return podstate.is_disruption(cause)
        return cause.exit_code >= 128
    return True


#: What the infrastructure budget's annotation must hold.
WHOLE_NUMBER = 'a whole number of restarts, e.g. "10"'


def invalid_annotation(key: str, value: str, expected: str) -> Decision:
    """The job fails ``InvalidSpec``: its annotation ``key`` holds ``value``, not what
    ``expected`` says."""
    message = R.invalid(f"metadata.annotations[{key}]: {value!r}: expected {expected}")
    return Decision(outcome=Outcome(ConditionType.FAILED, K.INVALID_SPEC, message))


def infrastructure_limit(job: JobBase) -> tuple[int, str | None]:
    """(the infrastructure restarts the job may use, the annotation's value when it is not
    a whole number: then the default applies and the job is refused as invalid)."""
    value = (job.metadata.annotations or {}).get(K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION)
    if value is None:
        return K.DEFAULT_INFRASTRUCTURE_RESTART_LIMIT, None
    if isinstance(value, str) and value.isdigit():
        return int(value), None
    return K.DEFAULT_INFRASTRUCTURE_RESTART_LIMIT, str(value)


def evaluate(
    kind: str,
    replicas: Sequence[Replica],
    observed: Observed,
    *,
    backoff_limit: int | None,
    restarts: Mapping[str, int],
    infrastructure: Mapping[str, int] | None = None,
    infrastructure_limit: int = K.DEFAULT_INFRASTRUCTURE_RESTART_LIMIT,
    counted: Mapping[str, frozenset[str]] | None = None,
    seen_restart_counts: Mapping[str, int] | None = None,
    tolerates_failure: Callable[[Replica], bool] = lambda r: False,
    job_name: str = "",
    max_restarts: Mapping[str, int] | None = None,
    batch_job: bool = False,
) -> RestartVerdict:
    """Decide, for every failed pod, between recreating it and failing the job.

    ``restarts`` are the persisted recreation counts per replica type (``infrastructure``
    those after infrastructure failures, against ``infrastructure_limit``); ``counted`` the
    persisted uids, per replica type, of failed pods already counted whose deletion is
    pending (or not visible yet); ``seen_restart_counts`` the in-place restart counts by
    pod uid at the last look. ``batch_job`` counts as the Job controller does instead
    (``batch_restart``): every failed pod is replaced whatever the restart policy, the
    failed pods and the in-place restarts each against the limit on their own, and the
    restart that brings the in-place count to the limit (to 1 with a limit of 0) ends it.
    """
    made = dict(restarts)
    infra = dict(infrastructure or {})
    infra_used = sum(infra.values())
    counted = counted or {}
    # A counted uid is kept while its pod is still there; once the pod is gone (deleted,
    # or recreated under a new uid) its failure is part of ``restarts`` only.
    still_counted: dict[str, set[str]] = {}
    seen = seen_restart_counts or {}
    # Each in-place restart not seen yet is numbered against the limit, one by one after
    # those already used: the one that exceeds the limit fails the job and is not worded
    # as a restart.
    in_place_total = 0
    unseen: list[InPlaceRestart] = []
    looked: dict[str, int] = {}
    for replica in replicas:
        pod = observed.pods.get(replica.pod_name)
        if pod is None:
            continue
        count = podstate.restart_count(pod)
        in_place_total += count
        uid = podstate.uid(pod)
        looked[uid] = count
        # A pod never looked at (a new one, or this operator process is new): its
        # earlier restarts were worded before, or are too old to be news; its latest is.
        for step in range(seen.get(uid, max(count - 1, 0)) + 1, count + 1):
            cause = podstate.last_restart(pod) if step == count else None
            unseen.append(InPlaceRestart(replica.pod_name, replica.replica_type, uid, step, cause))
    recreated = sum(made.values())
    restarted_before = in_place_total - len(unseen)
    used = recreated + restarted_before
    in_place: list[InPlaceRestart] = []
    failure: Outcome | None = None
    for restarted in unseen:
        if _over(backoff_limit, used, restarted_before, batch_job, in_place=True):
            assert backoff_limit is not None
            # Its pod's latest exit (the one ``lastState`` tells) is the cause to quote.
            latest = next(r for r in reversed(unseen) if r.uid == restarted.uid)
            failure = _in_place_exceeded(kind, job_name, latest, backoff_limit)
            break
        used += 1
        restarted_before += 1
        counted_as = restarted_before if batch_job else used
        in_place.append(dataclasses.replace(restarted, used=counted_as, limit=backoff_limit))
    recreate: list[Recreate] = []
    for replica in replicas:
        if failure is not None:
            break
        pod = observed.pods.get(replica.pod_name)
        if pod is None or not podstate.is_failed(pod) or podstate.is_deleting(pod):
            continue
        if tolerates_failure(replica):
            continue
        cause = podstate.failure(pod, replica.main_container)
        uid = podstate.uid(pod)
        if uid in counted.get(replica.replica_type, frozenset()):
            still_counted.setdefault(replica.replica_type, set()).add(uid)
            recreate.append(Recreate(replica, uid, cause, counted_now=False))
            continue
        if not batch_job and podstate.is_disruption(cause):
            if infra_used + 1 > infrastructure_limit:
                failure = Outcome(
                    ConditionType.FAILED,
                    R.INFRASTRUCTURE_RESTART_LIMIT_EXCEEDED,
                    R.infrastructure_restarts_exceeded(
                        kind,
                        job_name,
                        replica.replica_type,
                        replica.pod_name,
                        cause.describe(),
                        infrastructure_limit,
                    ),
                    replica_type=replica.replica_type,
                )
                break
            infra_used += 1
            infra[replica.replica_type] = infra.get(replica.replica_type, 0) + 1
            still_counted.setdefault(replica.replica_type, set()).add(uid)
            recreate.append(
                Recreate(
                    replica,
                    uid,
                    cause,
                    counted_now=True,
                    used=infra_used,
                    limit=infrastructure_limit,
                    infrastructure=True,
                )
            )
            continue
        if not (batch_job or retryable(replica.restart_policy, cause)):
            # The program's own failure (an infrastructure failure is recreated above).
            failure = Outcome(
                ConditionType.FAILED,
                R.lifecycle(kind, R.Verb.FAILED),
                R.pod_failed(
                    kind,
                    job_name,
                    replica.replica_type,
                    replica.pod_name,
                    cause.describe(),
                    replica.restart_policy.value,
                ),
                replica_type=replica.replica_type,
            )
            break
        cap = (max_restarts or {}).get(replica.replica_type)
        if cap is not None and made.get(replica.replica_type, 0) + 1 > cap:
            failure = Outcome(
                ConditionType.FAILED,
                R.BACKOFF_LIMIT_EXCEEDED,
                R.replica_restarts_exceeded(
                    kind, job_name, replica.replica_type, replica.pod_name, cause.describe(), cap
                ),
                replica_type=replica.replica_type,
            )
            break
        if _over(backoff_limit, used, recreated, batch_job, in_place=False):
            assert backoff_limit is not None
            failure = Outcome(
                ConditionType.FAILED,
                R.BACKOFF_LIMIT_EXCEEDED,
                R.backoff_exceeded(
                    kind,
                    job_name,
                    replica.replica_type,
                    replica.pod_name,
                    cause.describe(),
                    backoff_limit,
                ),
                replica_type=replica.replica_type,
            )
            break
        used += 1
        recreated += 1
        made[replica.replica_type] = made.get(replica.replica_type, 0) + 1
        still_counted.setdefault(replica.replica_type, set()).add(uid)
        counted_as = recreated if batch_job else used
        recreate.append(
            Recreate(replica, uid, cause, counted_now=True, used=counted_as, limit=backoff_limit)
        )
    if batch_job:
        used = recreated
    over = backoff_limit is not None and (
        (recreated > backoff_limit or restarted_before >= max(backoff_limit, 1))
        if batch_job
        else used > backoff_limit
    )
    if failure is None and over:
        # Restarts seen before the limit was lowered: the job is over it.
        assert backoff_limit is not None
        failure = _in_place_exceeded(kind, job_name, None, backoff_limit)
    if failure is not None:
        return RestartVerdict(
            failure=failure,
            restarts=dict(restarts),
            infrastructure=dict(infrastructure or {}),
            used=used,
            in_place=tuple(in_place),
            restart_counts=looked,
        )
    return RestartVerdict(
        recreate=tuple(recreate),
        restarts=made,
        infrastructure=infra,
        used=used,
        in_place=tuple(in_place),
        counted={rtype: frozenset(uids) for rtype, uids in still_counted.items()},
        restart_counts=looked,
    )


def _over(limit: int | None, used: int, own: int, batch_job: bool, *, in_place: bool) -> bool:
    """Whether one more restart exceeds ``limit``: ``used`` of all kinds, or (the Job
    controller's way) ``own``, the failed pods or the in-place restarts alone, where the
    in-place restart that reaches the limit is already too many."""
    if limit is None:
        return False
    if not batch_job:
        return used + 1 > limit
    return own + 1 >= max(limit, 1) if in_place else own + 1 > limit


def _in_place_exceeded(
    kind: str, job_name: str, restarted: InPlaceRestart | None, limit: int
) -> Outcome:
    cause = restarted.cause if restarted is not None else None
    return Outcome(
        ConditionType.FAILED,
        R.BACKOFF_LIMIT_EXCEEDED,
        R.backoff_exceeded(
            kind,
            job_name,
            restarted.replica_type if restarted else "",
            restarted.pod if restarted else "of the job",
            cause.describe() if cause else "container restarts",
            limit,
        ),
        replica_type=restarted.replica_type if restarted else None,
    )


def replica_limits(job: JobBase) -> dict[str, int]:
    """Per replica type, the recreations its pods may use (``kubetrain.dev/max-restarts``
    on the replica's pod template), alongside the job-wide backoffLimit."""
    out: dict[str, int] = {}
    for rtype, spec in job.replica_specs().items():
        annotations = ((spec.template or {}).get("metadata") or {}).get("annotations") or {}
        value = annotations.get(K.MAX_RESTARTS_ANNOTATION)
        if value is not None and str(value).isdigit():
            out[rtype] = int(value)
    return out


def decide_recreate(draft: Draft) -> Decision | None:
    """Delete each failed pod to recreate (the build step creates it again), with the
    Restarting condition, an Event and a metric for each restart counted now. The status
    (written before the deletions) records which failures were counted."""
    verdict = draft.restart
    if verdict is None:
        return None
    decision = Decision()
    for item in verdict.recreate:
        decision.delete.append(ref("Pod", draft.observed.pods[item.replica.pod_name]))
        if item.counted_now:
            decision.metrics.append(_metric(item))
            decision.events.append(
                Event(
                    "Warning",
                    item.cause.reason or R.lifecycle(draft.kind, R.Verb.RESTARTING),
                    _recreated(draft, item),
                    key=f"recreate/{item.uid}",
                )
            )
    if verdict.recreate:
        first = verdict.recreate[0]
        # The job's count of the first one's kind (backoffLimit's counts in-place ones too).
        used = first.used if first.infrastructure else verdict.used
        decision.conditions.append(
            ConditionChange(
                ConditionType.RESTARTING,
                ConditionStatus.TRUE,
                R.lifecycle(draft.kind, R.Verb.RESTARTING),
                _recreated(draft, dataclasses.replace(first, used=used)),
                event=None,
            )
        )
    return decision


def _metric(item: Recreate) -> str:
    """The metric event of a counted recreation."""
    return f"{INFRASTRUCTURE_METRIC}{item.cause.reason}" if item.infrastructure else "restarted"


def _recreated(draft: Draft, item: Recreate) -> str:
    """What a recreation says: its budget and whether it was the infrastructure's."""
    replica, cause = item.replica, item.cause.describe()
    if item.infrastructure:
        assert item.limit is not None
        return R.infrastructure_restarting(
            draft.kind,
            draft.name,
            replica.replica_type,
            replica.pod_name,
            cause,
            item.used,
            item.limit,
        )
    return R.restarting(
        draft.kind, draft.name, replica.replica_type, replica.pod_name, cause, item.used, item.limit
    )
