"""Goodput: the share of a job's time that advanced training, and what failures cost it.

A job's ``goodput`` status (``status.goodput``; a TrainJob's under ``status.kubetrain``)
starts at its first fault, and counts:

- ``faults``: gang restarts (a failed or lost pod, a hang), suspensions (Kueue's
  preemption among them) after the job had run, and, in a job that reports, a replica's
  main container restarted in place (``OnFailure``/``Always`` at pod scope: a rank that
  crashed) after the job's last report;
- ``lostSeconds``: for each fault, the time from the last checkpoint the job's code
  reported before it (``status.progress.checkpoint``; the fault itself when there is
  none: only the recovery is counted then) until the job trained again: its first
  progress report after the fault, or, for a job that never reports, its pods all
  running again. While a fault is open, ``openSince`` holds where its loss began;
- ``stepsRedone``: the steps between that checkpoint and the last step reported before
  the fault, which the job computes a second time (counted as the fault opens: a
  checkpoint the job writes on SIGTERM after that is not subtracted, though the loss of
  time ends at it);
- ``started`` (when the job first ran) and ``ratio``, 1 - lost / (now - started), written
  when a fault closes and when the job ends. The metrics compute it live.

A job that never had a fault has no goodput status (its goodput is 1).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from kubetrain.api.common import ConditionType, JobStatus
from kubetrain.api.progress_status import GoodputStatus
from kubetrain.controller import conditions as C
from kubetrain.controller import podstate

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft


def ratio(goodput: GoodputStatus, now: datetime) -> float | None:
    """1 - lost / wall (an open fault's loss so far counted); None before it ran."""
    started = C.parse_time(goodput.started)
    if started is None:
        return None
    wall = (now - started).total_seconds()
    if wall <= 0:
        return 1.0
    lost = float(goodput.lost_seconds)
    opened = C.parse_time(goodput.open_since)
    if opened is not None:
        lost += max(0.0, (now - opened).total_seconds())
    return max(0.0, min(1.0, 1.0 - lost / wall))


def _format(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def _started(status: JobStatus, now: datetime) -> str:
    """When the job first ran: its Running condition's first transition is not kept, so
    the earliest of its start time and its conditions' times."""
    times = [C.parse_time(status.start_time)]
    times += [C.parse_time(c.last_transition_time) for c in status.conditions or []]
    found = [t for t in times if t is not None]
    return C.format_time(min(found) if found else now)


def opened(draft: Draft) -> GoodputStatus:
    """The goodput status once a fault happened now (a second fault before the job
    recovered from the first keeps the first's start)."""
    current = draft.status
    now = draft.ctx.now
    goodput = current.goodput or GoodputStatus(started=_started(draft.current, now))
    if goodput.open_since is not None:
        return goodput.model_copy(update={"faults": goodput.faults + 1})
    progress = current.progress
    point = progress.checkpoint if progress else None
    since = now
    redone = 0
    if point is not None:
        checkpointed = C.parse_time(point.time)
        if checkpointed is not None and checkpointed <= now:
            since = max(checkpointed, C.parse_time(goodput.started) or checkpointed)
        if progress is not None and progress.step is not None:
            redone = max(0, progress.step - point.step)
    return goodput.model_copy(
        update={
            "faults": goodput.faults + 1,
            "open_since": C.format_time(since),
            "steps_redone": goodput.steps_redone + redone,
        }
    )


def _crash(draft: Draft) -> datetime | None:
    """When a replica's main container last restarted in place, among the job's pods."""
    assert draft.job is not None
    mains = {r.pod_name: r.main_container for r in draft.plugin.replicas(draft.job)}
    times = [
        C.parse_time(podstate.restarted_at(pod, mains[name]))
        for name, pod in draft.observed.pods.items()
        if name in mains and podstate.is_active(pod)
    ]
    return max((t for t in times if t is not None), default=None)


def crashed(draft: Draft) -> GoodputStatus | None:
    """The goodput status once a fault opened for a rank restarted in place since the
    job's last report; None otherwise (a fault already open, a job that does not report:
    its pods stay Running, so nothing would say when it trains again)."""
    progress = draft.status.progress
    goodput = draft.status.goodput
    if progress is None or (goodput is not None and goodput.open_since is not None):
        return None
    crash = _crash(draft)
    reported = C.parse_time(progress.last_report_time)
    if crash is None or reported is None or crash <= reported:
        return None
    return opened(draft)


def steps_to_redo(status: JobStatus) -> tuple[int, int] | None:
    """(checkpoint step, steps to redo) as the job's last report says, when it says."""
    progress = status.progress
    if progress is None or progress.checkpoint is None:
        return None
    point = progress.checkpoint
    return point.step, max(0, (progress.step or point.step) - point.step)


def closed(draft: Draft, trains: bool) -> GoodputStatus | None:
    """The goodput status once the job trains again (``trains``: its pods all run), or
    None when no fault is open or it does not train yet."""
    current = draft.status
    goodput = current.goodput
    if goodput is None or goodput.open_since is None or not trains:
        return None
    if C.is_true(draft.current, ConditionType.SUSPENDED):
        return None
    now = draft.ctx.now
    began = C.parse_time(goodput.open_since) or now
    progress = current.progress
    if progress is not None:
        # A job that reports: training again is its first report after the fault.
        state = current.gang_restart
        fault = C.parse_time(state.since) if state else None
        resumed = C.parse_time(current.start_time)
        after = max((t for t in (fault, resumed, _crash(draft)) if t is not None), default=None)
        reported = C.parse_time(progress.last_report_time)
        attempt = state.attempt if state else 0
        if reported is None or (progress.attempt or 0) != attempt:
            return None
        if after is not None and reported <= after:
            return None
        # A checkpoint written on the way down (on SIGTERM) saved what came before it.
        point = progress.checkpoint
        saved = C.parse_time(point.time) if point is not None else None
        if saved is not None and began < saved and (after is None or saved <= after):
            began = saved
    lost = goodput.lost_seconds + max(0, round((now - began).total_seconds()))
    done = goodput.model_copy(update={"open_since": None, "lost_seconds": lost})
    return done.model_copy(update={"ratio": _format(ratio(done, now))})


def ended(status: JobStatus, now: datetime) -> GoodputStatus | None:
    """The goodput status of a job ending now (an open fault's loss counted)."""
    goodput = status.goodput
    if goodput is None:
        return None
    began = C.parse_time(goodput.open_since)
    lost = goodput.lost_seconds
    if began is not None:
        lost += max(0, round((now - began).total_seconds()))
    done = goodput.model_copy(update={"open_since": None, "lost_seconds": lost})
    return done.model_copy(update={"ratio": _format(ratio(done, now))})
