"""Startup gating: a replica that connects to others at start (an MPI launcher to its
workers, PyTorch workers to their Master, TF workers to their Chief) is created only
once those pods are Ready and their Services exist, instead of crashing or looping in an
init container while they come up (mpi-operator#386, #481; pytorch-operator#125).

A replica created before its wait is over (an MPI launcher under
``launcherCreationPolicy: AtStartup``) carries the ``kubetrain.dev/startup`` scheduling
gate, lifted here once the pods it needs are Ready.

The wait is bounded: when the needed pods are not Ready ``timeout`` seconds after the
later of the job's start and their creation, the job fails with ``StartupTimeout`` and
the reason they are stuck (Unschedulable, ImagePullBackOff...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubetrain.api import keys as K
from kubetrain.api.common import ConditionType
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.conditions import parse_time
from kubetrain.controller.decisions import ChildRef, Decision, ref
from kubetrain.controller.model import Gate, Observed, Outcome, StartupRule

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft


def _pod_done(rule: StartupRule, pod: Mapping[str, Any]) -> bool:
    if rule.until == "Complete":
        return podstate.is_succeeded(pod)
    return podstate.is_ready(pod) or podstate.is_succeeded(pod)


def _ready(rule: StartupRule, observed: Observed) -> bool:
    pods_ready = all(
        name in observed.pods and _pod_done(rule, observed.pods[name]) for name in rule.needed_pods
    )
    return pods_ready and all(name in observed.services for name in rule.needed_services)


def _detail(rule: StartupRule, observed: Observed) -> str:
    parts: list[str] = []
    for name in rule.needed_pods:
        pod = observed.pods.get(name)
        if pod is None:
            parts.append(f"pod {name} does not exist")
            continue
        if _pod_done(rule, pod):
            continue
        found = podstate.problems(pod)
        if found:
            parts.append(found[0].describe(name))
        else:
            parts.append(f"pod {name} is {podstate.phase(pod)} and not Ready")
    missing = [s for s in rule.needed_services if s not in observed.services]
    if missing:
        parts.append(f"Service {', '.join(missing)} does not exist")
    return "; ".join(parts) or "not Ready"


def evaluate(
    rules: Sequence[StartupRule],
    observed: Observed,
    *,
    started_at: datetime | None,
    timeout_seconds: int,
) -> Gate:
    """Which replica types wait, and whether a wait has run out of time."""
    blocked: set[str] = set()
    waiting: list[StartupRule] = []
    soonest: float | None = None
    for rule in rules:
        if _ready(rule, observed):
            continue
        blocked.update(rule.waiting)
        waiting.append(rule)
        begun = [started_at] if started_at else []
        for name in rule.needed_pods:
            pod = observed.pods.get(name)
            created = parse_time(((pod or {}).get("metadata") or {}).get("creationTimestamp"))
            if created is not None:
                begun.append(created)
        if not begun:
            continue
        since = max(begun)
        left = timeout_seconds - (observed.now - since).total_seconds()
        if left <= 0:
            return Gate(
                blocked=frozenset(blocked),
                waiting=tuple(waiting),
                timed_out=rule,
                timeout_detail=_detail(rule, observed),
            )
        soonest = left if soonest is None else min(soonest, left)
    return Gate(
        blocked=frozenset(blocked),
        waiting=tuple(waiting),
        requeue_after=soonest,
        problems=tuple(_detail(r, observed) for r in waiting),
    )


def startup_timeout(raw: Mapping[str, Any], default: int) -> int:
    """The operator's startup timeout, or the job's annotation when it is a positive int."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(K.STARTUP_TIMEOUT_ANNOTATION)
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return default


def to_ungate(gate: Gate, observed: Observed) -> list[ChildRef]:
    """Pods created gated (``kubetrain.dev/startup``) whose replica type no longer waits."""
    blocked = {t.lower() for t in gate.blocked}
    out = []
    for _name, pod in sorted(observed.pods.items()):
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if (
            any(g.get("name") == K.STARTUP_GATE for g in gates)
            and labels.get(K.REPLICA_TYPE) not in blocked
            and not podstate.is_deleting(pod)
        ):
            out.append(ref("Pod", pod))
    return out


def decide(draft: Draft) -> Decision:
    """Which replicas wait (kept on the draft for the build step and the conditions), the
    children the job waits for (their events wake it), the gated pods that may go on,
    when to look again, and the failure when a wait ran out."""
    assert draft.job is not None
    timeout = startup_timeout(draft.raw, draft.ctx.startup_timeout_seconds)
    gate = evaluate(
        draft.plugin.startup_rules(draft.job),
        draft.observed,
        started_at=parse_time(draft.status.start_time),
        timeout_seconds=timeout,
    )
    draft.gate = gate
    awaiting = frozenset(
        {("Pod", name) for rule in gate.waiting for name in rule.needed_pods}
        | {("Service", name) for rule in gate.waiting for name in rule.needed_services}
    )
    decision = Decision(
        requeue_after=gate.requeue_after,
        awaiting=awaiting,
        ungate=to_ungate(gate, draft.observed),
    )
    if gate.timed_out is not None:
        rule = gate.timed_out
        decision.outcome = Outcome(
            ConditionType.FAILED,
            R.STARTUP_TIMEOUT,
            R.startup_timeout(
                draft.kind,
                draft.name,
                rule.waiting,
                rule.waiting_label,
                rule.needed_label,
                timeout,
                gate.timeout_detail,
            ),
        )
    return decision
