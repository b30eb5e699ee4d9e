"""``activeDeadlineSeconds`` and ``ttlSecondsAfterFinished``, enforced on time.

Both return how long until they are due, so the reconciler requeues the job for that
moment instead of waiting for the next event or resync (upstream's TTL waited for a
resync, hours later: trainer#1533). The deadline counts from ``status.startTime`` (reset
on resume); the TTL from ``status.completionTime``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubetrain.api.common import JobStatus, RunPolicy
from kubetrain.controller.conditions import parse_time

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
