"""A running job whose scaled replicas changed (what its CRD's scale subresource moves: a
PyTorchJob's Workers, an elastic TrainJob's nodes; the plugin counts them,
``JobPlugin.scaled``): what changed and why, said once.

The change is counted from the count last reconciled (the operator's memory) or, after an
operator restart, from the children there (a PyTorchJob's Worker Services, one per
replica and kept across pod restarts; a TrainJob's node pods). A job that is not Running
yet has nothing to announce: its first pods are being created. The Event is ``ScaledUp``
or ``ScaledDown``, ``2 -> 4 workers (HPA: cpu 85% > 75%)``: the job's HPA's last
measurements against its targets, else the job's own spec (``kubectl scale``, an edit).
The Running condition's message carries the same sentence until the next scale, so
``kubectl describe`` and the SDK show the last one.

The pods themselves are the children policy's (``desired``): new replicas are created,
surplus ones deleted, the others left alone (pods are never rewritten: an elastic job's
agents re-form the group around them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ConditionChange, Decision, Event

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: What the scale sentence starts with in the Running condition's message.
MARKERS = (f"{R.SCALED_UP}: ", f"{R.SCALED_DOWN}: ")
#: Said when no HPA made the change.
BY_SPEC = "the job's spec: kubectl scale or an edit"
#: A change the job's HPA has not recorded deciding is looked at again this often, at most
#: this many times, before it is taken for someone else's (``kubectl scale`` beside an HPA).
WAIT_SECONDS = 1.0
MAX_WAITS = 3
#: The memory key (beside the scaled count's) of how many times a change has waited.
WAITS = "/waits"


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
    scaled = draft.plugin.scaled(job, draft.observed) if job is not None else None
    if job is None or scaled is None:
        return None
    now = scaled.count
    waits_key = f"{scaled.key}{WAITS}"
    decision = Decision(seen_scale={scaled.key: now, waits_key: 0})
    before = draft.ctx.seen_scale.get(scaled.key)
    running = draft.has(ConditionType.RUNNING)
    if before is None and running:
        before = scaled.present or None
    if before is None or before == now or not running:
        return decision
    hpa = draft.observed.autoscalers.get(job.name)
    decided = hpa is not None and (hpa.get("status") or {}).get("desiredReplicas") == now
    waits = draft.ctx.seen_scale.get(waits_key, 0)
    if hpa is not None and not decided and waits < MAX_WAITS:
        # The HPA writes its status just after it resizes the job: wait for it (its update
        # wakes the job) to say why, remembering the count from before.
        return Decision(
            seen_scale={scaled.key: before, waits_key: waits + 1}, requeue_after=WAIT_SECONDS
        )
    cause = (why(hpa) if decided else None) or BY_SPEC
    reason = R.SCALED_UP if now > before else R.SCALED_DOWN
    message = f"{before} -> {now} {scaled.unit} ({cause})"
    generation = (draft.raw.get("metadata") or {}).get("generation")
    decision.events.append(
        Event("Normal", reason, message, key=f"scaled/{generation}/{scaled.key}/{now}")
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
