"""``activeDeadlineSeconds`` and ``ttlSecondsAfterFinished``, enforced on time.

Both return how long until they are due, so the reconciler requeues the job for that
moment instead of waiting for the next event or resync (upstream's TTL waited for a
resync, hours later: trainer#1533). The deadline counts from ``status.startTime`` (reset
on resume); the TTL from ``status.completionTime``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from kubetrain.api.common import ConditionType, JobStatus, RunPolicy
from kubetrain.controller import reasons as R
from kubetrain.controller.conditions import format_time, parse_time
from kubetrain.controller.decisions import Decision
from kubetrain.controller.model import Outcome

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: Requeue this much after a due time, so the clock has passed it when the job is seen.
SLACK_SECONDS = 0.05


@dataclass(frozen=True)
class Due:
    """``due``: the time has come; otherwise ``after`` seconds until it does (None: never)."""

    due: bool
    after: float | None = None


NEVER = Due(False, None)


def _due(start: datetime | None, seconds: int | None, now: datetime) -> Due:
    if start is None or seconds is None:
        return NEVER
    left = seconds - (now - start).total_seconds()
    if left <= 0:
        return Due(True)
    return Due(False, left + SLACK_SECONDS)


def active_deadline(run_policy: RunPolicy | None, status: JobStatus | None, now: datetime) -> Due:
    """Whether the job has run longer than ``activeDeadlineSeconds`` since it started."""
    seconds = run_policy.active_deadline_seconds if run_policy else None
    start = parse_time(status.start_time) if status else None
    return _due(start, seconds, now)


def ttl_after_finished(
    run_policy: RunPolicy | None, status: JobStatus | None, now: datetime
) -> Due:
    """Whether a finished job's ``ttlSecondsAfterFinished`` has passed (delete it)."""
    seconds = run_policy.ttl_seconds_after_finished if run_policy else None
    end = parse_time(status.completion_time) if status else None
    return _due(end, seconds, now)


def decide(draft: Draft) -> Decision:
    """The job's clock: ``startTime`` (now, on a first or resumed start), and the failure
    when ``activeDeadlineSeconds`` has passed since then, else a requeue for that moment."""
    start_time = draft.status.start_time or format_time(draft.ctx.now)
    started = draft.status.model_copy(update={"start_time": start_time})
    due = active_deadline(draft.run_policy, started, draft.ctx.now)
    decision = Decision(status={"start_time": start_time}, requeue_after=due.after)
    if due.due:
        seconds = draft.run_policy.active_deadline_seconds if draft.run_policy else None
        decision.outcome = Outcome(
            ConditionType.FAILED,
            R.DEADLINE_EXCEEDED,
            R.deadline_exceeded(draft.kind, draft.name, seconds or 0),
        )
    return decision
