"""The reconcile decision, as one pure function: from a job (as the API server served
it), its plugin, its observed children and the time, what to create, apply and delete,
which status to write, which Events to emit and when to look again.

Each policy decides one concern and returns its consequences (conditions, Events, metric
increments, deletions); :data:`PRECEDENCE` is the order in which they are asked, and the
first one that ends the job (or the reconcile) has the last word (a decision that ends
the job is followed by ``policies/finish``, its consequences):

    invalid > finished > (created, pinned children) > suspended > deadline > node
    annotations > gang restart > hang
    > failure > success > startup > restart > scaling > children > progress
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.api.common import ConditionStatus, ConditionType, JobStatus
from kubetrain.controller import conditions as C
from kubetrain.controller import desired, node_health
from kubetrain.controller.decisions import Context, Decision, Event, Plan
from kubetrain.controller.draft import Draft, status_wire
from kubetrain.controller.model import Observed, Outcome
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.policies import (
    cleanup,
    deadlines,
    failure,
    gang_restart,
    hang,
    progress,
    restart,
    scaling,
    startup,
    success,
    suspend,
    validity,
)

Policy = Callable[[Draft], Decision | None]


def _node_annotations(draft: Draft) -> Decision | None:
    """Refuse a job whose node annotations (``node_health.job_rules``) are invalid."""
    if draft.node_problem is None:
        return None
    key, value = draft.node_problem
    return restart.invalid_annotation(key, value, node_health.EXPECTED[key])


#: The policies in order of precedence (see the module docs). ``Draft.created`` gives a
#: job that is neither invalid nor finished its Created condition.
PRECEDENCE: tuple[Policy, ...] = (
    validity.decide,
    cleanup.decide_finished,
    Draft.created,
    desired.decide_pinned,
    suspend.decide,
    deadlines.decide,
    _node_annotations,
    gang_restart.decide,
    hang.decide,
    failure.decide,
    success.decide,
    startup.decide,
    restart.decide_recreate,
    scaling.decide,
    desired.decide,
    progress.decide,
)


def plan(raw: Mapping[str, Any], plugin: JobPlugin[Any], observed: Observed, ctx: Context) -> Plan:
    """Decide one reconcile of ``raw`` (a job as served, managedBy already checked).

    The policies see the job's pods on lost or unhealthy nodes as the infrastructure
    failures they are (``node_health.view``); deletions on unreachable nodes are then
    forced where the job allows it (``node_health.finish``)."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    rules, invalid = node_health.job_rules(annotations, ctx.node_rules)
    found = node_health.troubles(observed, rules, ctx.now)
    draft = Draft(raw, plugin, node_health.view(observed, found), ctx)
    draft.node_problem = invalid
    for policy in PRECEDENCE:
        if draft.take(policy(draft)):
            break
    done = draft.done()
    node_health.finish(done, observed, found, rules)
    return done


def plan_failure(
    raw: Mapping[str, Any],
    plugin: JobPlugin[Any],
    observed: Observed,
    ctx: Context,
    outcome: Outcome,
) -> Plan:
    """A plan that ends the job with ``outcome`` (e.g. the API server rejected a child)."""
    draft = Draft(raw, plugin, observed, ctx)
    if not draft.finished:
        draft.take(Decision(outcome=outcome))
    return draft.done()


def _status_of(raw: Mapping[str, Any], plugin: JobPlugin[Any], plan: Plan) -> JobStatus:
    """The status a plan writes, or the job's current one when it writes none."""
    wire = plan.status if plan.status is not None else raw.get("status")
    return plugin.status_codec.read(wire)


def _with_status(
    raw: Mapping[str, Any],
    plugin: JobPlugin[Any],
    observed: Observed,
    plan: Plan,
    new: JobStatus,
    ctx: Context,
) -> Plan:
    plan.status = status_wire(raw, plugin, plan.job, new, observed, ctx.now)
    return plan


def with_blocked_child(
    raw: Mapping[str, Any],
    plugin: JobPlugin[Any],
    observed: Observed,
    plan: Plan,
    ctx: Context,
    reason: str,
    message: str,
) -> Plan:
    """``plan`` after its child writes failed for a reason the job must show: the job's
    current state (Created, Running or Restarting) takes ``reason`` and ``message``, and
    a Warning Event says the same. Deletions, other Events and counters stand."""
    status = _status_of(raw, plugin, plan)
    conditions = list(status.conditions or [])
    live = (ConditionType.CREATED, ConditionType.RUNNING, ConditionType.RESTARTING)
    current = next(
        (c for c in reversed(conditions) if c.type in live and c.status == ConditionStatus.TRUE),
        None,
    )
    kind = current.type if current is not None else ConditionType.CREATED
    conditions = C.set_condition(conditions, kind, ConditionStatus.TRUE, reason, message, ctx.now)
    plan = _with_status(
        raw, plugin, observed, plan, status.model_copy(update={"conditions": conditions}), ctx
    )
    plan.apply, plan.create = [], []
    plan.events.append(Event("Warning", reason, message, key=f"blocked/{message}"))
    return plan
