"""The failure decision: after each look at a job's pods, whether a failure ends the job.

It picks the restart model a job counts by and asks it for a verdict: the plugin's
per-replicated-job limits (a TrainJob's Jobs, counted as the Job controller counts them:
``batch_restart``) or the job-wide ``runPolicy.backoffLimit`` with per-replica caps
(``restart``). The in-place restarts the verdict numbers each get an Event and a metric;
the pods it would recreate wait on the draft for :func:`restart.decide_recreate`, which
runs only if no later policy ends the job first.

Both models sit below this module, so neither imports the other: ``batch_restart`` applies
``restart.evaluate`` per replicated job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.api import keys as K
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import Decision, Event
from kubetrain.controller.policies.batch_restart import evaluate_jobs
from kubetrain.controller.policies.restart import (
    WHOLE_NUMBER,
    evaluate,
    infrastructure_limit,
    invalid_annotation,
    replica_limits,
)

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft


def _limit(draft: Draft) -> int | None:
    return draft.run_policy.backoff_limit if draft.run_policy else None


def decide(draft: Draft) -> Decision:
    """Count in-place restarts (a metric and an Event each), and end the job when a failure
    is not retried or the backoff limit is used up. The pods to recreate are kept on the
    draft for :func:`restart.decide_recreate`, which runs only if nothing else ends the job."""
    job, plugin, ctx = draft.job, draft.plugin, draft.ctx
    assert job is not None
    limits = plugin.backoff_limits(job)
    if limits is not None:
        verdict = evaluate_jobs(
            draft.kind,
            plugin.replicas(job),
            draft.observed,
            limits=limits,
            restarts=draft.persisted_restarts,
            counted=draft.persisted_counted,
            seen_restart_counts=ctx.seen_restart_counts,
            tolerates_failure=lambda r: plugin.tolerates_failure(job, r),
            job_name=draft.name,
        )
    else:
        infra_limit, invalid = infrastructure_limit(job)
        if invalid is not None:
            key = K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION
            return invalid_annotation(key, invalid, WHOLE_NUMBER)
        verdict = evaluate(
            draft.kind,
            plugin.replicas(job),
            draft.observed,
            backoff_limit=_limit(draft),
            restarts=draft.persisted_restarts,
            infrastructure=draft.persisted_infrastructure,
            infrastructure_limit=infra_limit,
            counted=draft.persisted_counted,
            seen_restart_counts=ctx.seen_restart_counts,
            tolerates_failure=lambda r: plugin.tolerates_failure(job, r),
            job_name=draft.name,
            max_restarts=replica_limits(job),
        )
    draft.restart = verdict
    decision = Decision(outcome=verdict.failure)
    # Every live pod's count, 0 included: a pod looked at is then told from one never
    # looked at, whose earlier restarts are no news.
    decision.seen_restart_counts.update(verdict.restart_counts)
    for restarted in verdict.in_place:
        decision.metrics.append("restarted")
        cause = restarted.cause.describe() if restarted.cause else "a container restarted"
        reason = restarted.cause.reason if restarted.cause else "BackOff"
        decision.events.append(
            Event(
                "Warning",
                reason if reason != "Completed" else R.lifecycle(draft.kind, R.Verb.RESTARTING),
                R.restarted_in_place(
                    draft.kind,
                    draft.name,
                    restarted.replica_type,
                    restarted.pod,
                    cause,
                    restarted.used,
                    restarted.limit,
                ),
                key=f"restart/{restarted.uid}/{restarted.count}",
            )
        )
    replica_statuses = dict(draft.replica_statuses)
    for field, counts in (
        ("restarts", verdict.restarts),
        ("infrastructure_restarts", verdict.infrastructure),
    ):
        for rtype, count in counts.items():
            if count and rtype in replica_statuses:
                replica_statuses[rtype] = replica_statuses[rtype].model_copy(update={field: count})
    for rtype, uids in verdict.counted.items():
        if uids and rtype in replica_statuses:
            replica_statuses[rtype] = replica_statuses[rtype].model_copy(
                update={"counted_failures": sorted(uids)}
            )
    decision.replica_statuses = replica_statuses
    return decision
