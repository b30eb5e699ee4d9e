"""A running job whose scaled replicas changed (the replica type behind its CRD's scale
subresource: a PyTorchJob's Workers): what changed and why, said once.

The change is counted from the count last reconciled (the operator's memory) or, after an
operator restart, from the Services of that replica type (one per replica, kept across
pod restarts). A job that is not Running yet has nothing to announce: its first pods are
being created. The Event is ``ScaledUp`` or ``ScaledDown``, ``2 -> 4 workers (HPA: cpu
85% > 75%)``: the job's HPA's last measurements against its targets, else the job's own
spec (``kubectl scale``, an edit). The Running condition's message carries the same
sentence until the next scale, so ``kubectl describe`` and the SDK show the last one.

The pods themselves are the children policy's (``desired``): new replicas are created,
surplus ones deleted, the others left alone (pods are never rewritten: an elastic job's
agents re-form the group around them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubetrain.api import keys as K
from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.api.kinds import kind_info
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ConditionChange, Decision, Event
from kubetrain.frameworks.replicas import replicas_of

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: What the scale sentence starts with in the Running condition's message.
MARKERS = (f"{R.SCALED_UP}: ", f"{R.SCALED_DOWN}: ")
#: Said when no HPA made the change.
BY_SPEC = "the job's spec: kubectl scale or an edit"


def _services_of(draft: Draft, replica_type: str) -> int:
    """The replica type's Services that are not being deleted."""
    wanted = replica_type.lower()
    return sum(
        1
        for svc in draft.observed.services.values()
        if ((svc.get("metadata") or {}).get("labels") or {}).get(K.REPLICA_TYPE) == wanted
        and not podstate.is_deleting(svc)
    )


def note(draft: Draft) -> str:
    """The last scale's sentence in the job's Running condition message, if any."""
    for condition in draft.conditions:
        if condition.type != ConditionType.RUNNING or not condition.message:
            continue
        starts = [condition.message.find(m) for m in MARKERS]
        found = [s for s in starts if s >= 0]
        if found:
            return condition.message[min(found) :]
    return ""


def _source(spec_or_status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The typed part of a MetricSpec or MetricStatus (``resource``, ``pods``, ...)."""
    key = {
        "Resource": "resource",
        "ContainerResource": "containerResource",
        "Pods": "pods",
        "Object": "object",
        "External": "external",
    }.get(str(spec_or_status.get("type")), "")
    value = spec_or_status.get(key)
    return value if isinstance(value, Mapping) else {}


def _name(source: Mapping[str, Any]) -> str:
    """A metric's name: ``cpu`` for a resource, else the metric's own."""
    if "name" in source:
        return str(source["name"])
    return str((source.get("metric") or {}).get("name", "metric"))


def _pair(target: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[str, str] | None:
    """The measured value and its target, in the target's terms."""
    for key, suffix in (("averageUtilization", "%"), ("averageValue", ""), ("value", "")):
        if key in target and key in current:
            return f"{current[key]}{suffix}", f"{target[key]}{suffix}"
    return None


def _compare(now: str, target: str) -> str:
    """``>``, ``<`` or ``=``, when both are numbers (a quantity such as ``500m``: ``vs``)."""
    try:
        a, b = float(now.rstrip("%")), float(target.rstrip("%"))
    except ValueError:
        return "vs"
    return ">" if a > b else "<" if a < b else "="


def why(autoscaler: Mapping[str, Any] | None) -> str | None:
    """``HPA: cpu 85% > 75%`` from the HPA's spec and its last measurements (one entry
    per metric, ``; ``-joined); ``HPA`` alone while it has measured nothing; None
    without an HPA (the scale came from elsewhere: ``kubectl scale``, an edit)."""
    if autoscaler is None:
        return None
    targets = (autoscaler.get("spec") or {}).get("metrics") or []
    measured = (autoscaler.get("status") or {}).get("currentMetrics") or []
    parts = []
    for spec in targets:
        source = _source(spec)
        for status in measured:
            current = _source(status)
            if status.get("type") != spec.get("type") or _name(current) != _name(source):
                continue
            pair = _pair(source.get("target") or {}, current.get("current") or {})
            if pair is not None:
                now, target = pair
                parts.append(f"{_name(source)} {now} {_compare(now, target)} {target}")
    return "HPA: " + "; ".join(parts) if parts else "HPA"


def decide(draft: Draft) -> Decision | None:
    """An Event and the Running message when the scaled count changed (see the module
    docs); the count is remembered either way."""
    job = draft.job
    replica_type = kind_info(draft.kind).scale_replica_type
    if job is None or replica_type is None:
        return None
    now = replicas_of(job.replica_specs().get(replica_type))
    decision = Decision(seen_scale={replica_type: now})
    before = draft.ctx.seen_scale.get(replica_type)
    running = draft.has(ConditionType.RUNNING)
    if before is None and running:
        before = _services_of(draft, replica_type) or None
    if before is None or before == now or not running:
        return decision
    scaling = draft.plugin.autoscaling(job)
    unit = scaling.unit if scaling is not None else f"{replica_type.lower()}s"
    cause = why(draft.observed.autoscalers.get(job.name)) or BY_SPEC
    reason = R.SCALED_UP if now > before else R.SCALED_DOWN
    message = f"{before} -> {now} {unit} ({cause})"
    generation = (draft.raw.get("metadata") or {}).get("generation")
    decision.events.append(
        Event("Normal", reason, message, key=f"scaled/{generation}/{replica_type}/{now}")
    )
    decision.conditions.append(
        ConditionChange(
            ConditionType.RUNNING,
            ConditionStatus.TRUE,
            R.lifecycle(draft.kind, R.Verb.RUNNING),
            f"{R.running(draft.kind, draft.name)} {reason}: {message}",
            event=None,
        )
    )
    return decision
