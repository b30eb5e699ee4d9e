"""While a job runs, its conditions follow its pods: Running once every replica's pod
runs, else Created with what it waits for (the startup gate's rules) and any pod problem
(Unschedulable, ImagePullBackOff, ...), which also gets a Warning Event named after it.
Restarting is the restart policy's; Running and Restarting replace each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.api.common import ConditionStatus, ConditionType, JobStatus
from kubetrain.controller import conditions as C
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ConditionChange, Decision, Event
from kubetrain.controller.model import WRITE_BATCH, Observed
from kubetrain.controller.policies import goodput, scaling

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: Pod problems quoted in a condition message.
QUOTED_PROBLEMS = 3


def _problems(observed: Observed) -> list[tuple[str, podstate.Problem, str]]:
    out = []
    for name, pod in sorted(observed.pods.items()):
        if not podstate.is_active(pod):
            continue
        found = podstate.problems(pod)
        if found:
            out.append((name, found[0], podstate.uid(pod)))
    return out


def decide(draft: Draft) -> Decision:
    """The Running or Created condition, pod problem Events, and the replica counts."""
    assert draft.job is not None
    kind, name = draft.kind, draft.name
    decision = Decision(status={"replica_statuses": draft.replica_statuses})
    problems = _problems(draft.observed)
    for pod_name, problem, uid in problems:
        decision.events.append(
            Event(
                "Warning",
                problem.reason,
                problem.describe(pod_name),
                key=f"problem/{uid}/{problem.reason}",
            )
        )
    problem_text = "; ".join(p.describe(n) for n, p, _ in problems[:QUOTED_PROBLEMS])
    if draft.restart is not None and draft.restart.recreate:
        return decision  # Restarting, set by the restart policy
    if draft.plugin.is_running(draft.job, draft.observed):
        recovered = _recovered(draft)
        if recovered is not None:
            decision.events.append(recovered)
        accounted = goodput.closed(draft, trains=True) or goodput.crashed(draft)
        if accounted is not None:
            decision.status["goodput"] = accounted
        decision.conditions.append(
            ConditionChange(
                ConditionType.RUNNING,
                ConditionStatus.TRUE,
                R.lifecycle(kind, R.Verb.RUNNING),
                " ".join(
                    t for t in (R.running(kind, name), scaling.note(draft), problem_text) if t
                ),
            )
        )
        return decision
    waiting_rules = draft.gate.waiting if draft.gate is not None else ()
    for rule in waiting_rules:
        decision.events.append(
            Event(
                "Normal",
                R.STARTUP_WAITING,
                R.startup_waiting(rule.waiting_label, rule.needed_label),
                key=f"waiting/{draft.status.start_time}/{','.join(rule.waiting)}",
            )
        )
    if draft.has(ConditionType.RESTARTING):
        # A restart's new pods that cannot run yet (a drained node, no capacity): the
        # Restarting condition says what it waits for, after why it restarted.
        restarting = C.get(JobStatus(conditions=draft.conditions), ConditionType.RESTARTING)
        assert restarting is not None
        base = (restarting.message or "").split(R.RESTART_WAITING)[0]
        message = f"{base}{R.RESTART_WAITING}{problem_text}" if problem_text else base
        if message != (restarting.message or ""):
            decision.conditions.append(
                ConditionChange(
                    ConditionType.RESTARTING,
                    ConditionStatus.TRUE,
                    restarting.reason or R.lifecycle(kind, R.Verb.RESTARTING),
                    message,
                    event=None,
                )
            )
        return decision
    if not draft.has(ConditionType.RUNNING):
        waiting = "; ".join(
            R.startup_waiting(r.waiting_label, r.needed_label) for r in waiting_rules
        )
        gang = draft.plugin.gang_of(draft.job)
        if gang is not None:
            unbound = [p for p in draft.observed.pods.values() if podstate.is_unbound(p)]
            if unbound or not draft.observed.pods:
                waiting = " ".join(
                    t for t in (waiting, R.gang_waiting(gang.backend.scheduler, name)) if t
                )
        creating = ""
        if draft.creating is not None:
            creating = R.creating_children(*draft.creating, batch=WRITE_BATCH)
        text = " ".join(t for t in (R.created(kind, name), creating, waiting, problem_text) if t)
        decision.conditions.append(
            ConditionChange(
                ConditionType.CREATED,
                ConditionStatus.TRUE,
                R.lifecycle(kind, R.Verb.CREATED),
                text,
                event=None,
            )
        )
    return decision


def _recovered(draft: Draft) -> Event | None:
    """The Event of a job running again after a gang restart: how long it took (from the
    moment its attempt began, recorded with it; for a status written before that was
    recorded, the Restarting condition's transition) and why it restarted."""
    state = draft.current.gang_restart
    if state is None or not state.attempt or not draft.has(ConditionType.RESTARTING):
        return None
    restarting = C.get(JobStatus(conditions=draft.conditions), ConditionType.RESTARTING)
    if restarting is None or R.gang_starts_again(state.attempt) not in (restarting.message or ""):
        return None  # a pod restarted alone since (Pod scope): not the gang's recovery
    since = C.parse_time(state.since or (restarting.last_transition_time if restarting else None))
    took = f" {max(0.0, (draft.ctx.now - since).total_seconds()):.0f} s" if since else ""
    return Event(
        "Normal",
        R.RECOVERED,
        R.recovered(draft.kind, draft.name, state.attempt, state.reason or "", took),
        key=f"recovered/{state.attempt}",
    )
