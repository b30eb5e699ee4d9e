"""Hang detection: a running job whose training stops reporting progress is restarted as
a gang from its last checkpoint.

A rank stuck in a collective (a dead NCCL peer, a deadlocked data loader) fails nothing:
every pod stays Running while the GPUs idle. The job's own progress reports (the
progress server's heartbeat, ``status.progress.lastReportTime``) say otherwise. Settings,
each a whole number of seconds (0: off), from the job's annotation, else (a TrainJob) its
runtime template's, else the operator's flag:

- ``kubetrain.dev/progress-timeout-seconds`` (``--progress-timeout-seconds``): a job that
  reported in its current gang attempt and then stays silent this long has hung;
- ``kubetrain.dev/progress-startup-timeout-seconds``
  (``--progress-startup-timeout-seconds``): a job whose pods all run and that has not
  reported within this long has not started training (told apart from one that
  stopped). A job that reported in an earlier attempt is held to the progress timeout
  too after a restart when no startup timeout is set; a job that never reported, only
  to its startup timeout (a job that does not report is never taken for hung).

A hung job's gang restarts as the next attempt (``policies/gang_restart`` finishes it)
with reason ``Hang`` (``NoProgressReport`` for a startup timeout), counted in
``status.gangRestart.hangs`` against ``kubetrain.dev/hang-restart-limit`` (default 3;
past it the job fails ``HangRestartLimitExceeded``), never against backoffLimit or the
infrastructure budget. Its pods get ``HANG_TERMINATION_GRACE_SECONDS`` to end: a rank
stuck in a collective cannot save a consistent checkpoint, so the job resumes from the
last one it reported (``KUBETRAIN_CHECKPOINT_STEP``/``_PATH``). The Event and the
Restarting condition name the last report and the steps to redo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubetrain.api import keys as K
from kubetrain.api.common import ConditionStatus, ConditionType, GangRestartStatus
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.controller import conditions as C
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import (
    HANG_METRIC,
    ChildRef,
    ConditionChange,
    Decision,
    Event,
)
from kubetrain.controller.model import Outcome
from kubetrain.controller.policies import goodput
from kubetrain.controller.policies.gang_restart import attempt_of, older_than
from kubetrain.controller.policies.restart import invalid_annotation

if TYPE_CHECKING:
    from kubetrain.api.common import JobBase
    from kubetrain.controller.draft import Draft

SECONDS = 'a whole number of seconds, e.g. "300" (0: off)'
RESTARTS = 'a whole number of restarts, e.g. "3"'
#: Look again this long after a deadline, so the silence has surely passed it.
SLACK_SECONDS = 0.5


@dataclass(frozen=True)
class Settings:
    timeout: int = 0
    startup: int = 0
    limit: int = K.DEFAULT_HANG_RESTART_LIMIT


def _annotations(job: JobBase) -> Mapping[str, str]:
    """The job's annotations over (a TrainJob's) its runtime template's."""
    own = job.metadata.annotations or {}
    if isinstance(job, ResolvedTrainJob):
        return {**job.spec.annotations, **own}
    return own


def settings(
    job: JobBase, timeout: int = 0, startup: int = 0
) -> tuple[Settings, tuple[str, str, str] | None]:
    """The job's settings over the operator's defaults, or (key, value, expected) of an
    annotation that is not a whole number."""
    found = _annotations(job)
    values = {
        K.PROGRESS_TIMEOUT_ANNOTATION: timeout,
        K.PROGRESS_STARTUP_TIMEOUT_ANNOTATION: startup,
        K.HANG_RESTART_LIMIT_ANNOTATION: K.DEFAULT_HANG_RESTART_LIMIT,
    }
    for key in values:
        value = found.get(key)
        if value is None:
            continue
        if not value.isdigit():
            expected = RESTARTS if key == K.HANG_RESTART_LIMIT_ANNOTATION else SECONDS
            return Settings(), (key, value, expected)
        values[key] = int(value)
    return (
        Settings(
            values[K.PROGRESS_TIMEOUT_ANNOTATION],
            values[K.PROGRESS_STARTUP_TIMEOUT_ANNOTATION],
            values[K.HANG_RESTART_LIMIT_ANNOTATION],
        ),
        None,
    )


def decide(draft: Draft) -> Decision | None:
    """Restart a running job that stopped reporting (see the module docs); or look again
    when its silence would reach the timeout."""
    job = draft.job
    assert job is not None
    ctx = draft.ctx
    found, invalid = settings(
        job, ctx.progress_timeout_seconds, ctx.progress_startup_timeout_seconds
    )
    if invalid is not None:
        return invalid_annotation(*invalid)
    if not (found.timeout or found.startup):
        return None
    if not draft.plugin.is_running(job, draft.observed):
        return None
    state = draft.current.gang_restart or GangRestartStatus(attempt=0)
    if any(attempt_of(p) != state.attempt for p in draft.observed.pods.values()):
        return None  # an attempt is being replaced (policies/gang_restart)
    now = ctx.now
    running = C.get(draft.current, ConditionType.RUNNING)
    # Its pods all run since the Running condition's transition (now, when this reconcile
    # is the one that finds them running), and not before the attempt or the resume.
    began = now
    if running is not None and running.status == ConditionStatus.TRUE:
        began = C.parse_time(running.last_transition_time) or now
    started = [t for t in (C.parse_time(state.since), C.parse_time(draft.current.start_time)) if t]
    this_run = max(started) if started else None
    began = max(began, this_run) if this_run else began
    progress = draft.current.progress
    reported = C.parse_time(progress.last_report_time) if progress else None
    reports_now = (
        progress is not None
        and reported is not None
        and (progress.attempt or 0) == state.attempt
        and (this_run is None or reported >= this_run)
    )
    if reports_now:
        assert progress is not None and reported is not None
        limit, silent_from = found.timeout, reported
        at = C.format_time(reported)
        why = R.stopped_reporting(
            (now - reported).total_seconds(),
            R.last_report(progress.step, at, progress.node, progress.pod),
        )
        reason = R.HANG
    else:
        # Not reported since this attempt or resume began: a job that reported before is
        # held to its startup timeout, else its progress timeout; one that never did, to
        # its startup timeout only.
        limit = found.startup or (found.timeout if progress is not None else 0)
        silent_from = began
        again = state.attempt > 0 or progress is not None
        why = R.never_reported((now - silent_from).total_seconds(), again)
        reason = R.NO_PROGRESS_REPORT
    if not limit:
        return None
    silent = (now - silent_from).total_seconds()
    if silent < limit:
        return Decision(requeue_after=limit - silent + SLACK_SECONDS)
    return _restart(draft, found, state, why, reason)


def _restart(
    draft: Draft, found: Settings, state: GangRestartStatus, why: str, reason: str
) -> Decision:
    used = (state.hangs or 0) + 1
    if used > found.limit:
        message = R.hang_restarts_exceeded(
            draft.kind, draft.name, why, found.limit, K.HANG_RESTART_LIMIT_ANNOTATION
        )
        return Decision(
            outcome=Outcome(ConditionType.FAILED, K.HANG_RESTART_LIMIT_EXCEEDED, message)
        )
    attempt = state.attempt + 1
    redo = goodput.steps_to_redo(draft.status)
    resume = R.resume_point(*(redo or (None, None)))
    text = R.hang_restarting(draft.kind, draft.name, why, attempt, used, found.limit, resume)
    next_state = state.model_copy(
        update={
            "attempt": attempt,
            "trigger": f"hang/{state.attempt}",
            "hangs": used,
            "reason": reason,
            "since": C.format_time(draft.ctx.now),
        }
    )
    grace = K.HANG_TERMINATION_GRACE_SECONDS
    delete = [
        ChildRef(r.kind, r.name, r.uid, r.deleting, grace=grace) for r in older_than(attempt, draft)
    ]
    return Decision(
        status={"gang_restart": next_state, "goodput": goodput.opened(draft)},
        delete=delete,
        conditions=[
            ConditionChange(
                ConditionType.RESTARTING,
                ConditionStatus.TRUE,
                R.lifecycle(draft.kind, R.Verb.RESTARTING),
                text,
                event=None,
            )
        ],
        events=[Event("Warning", R.HANG_RESTART, text, key=f"hang/{state.attempt}")],
        metrics=[f"{HANG_METRIC}{reason}"],
        final=True,
        requeue_after=1.0,
    )
