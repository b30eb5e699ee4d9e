"""Nodes that can no longer run a job's pods, and what becomes of the pods on them.

A job's pod is **lost with its node** when the node

- is gone (its Node object deleted), or
- has not been Ready (``Ready`` False or Unknown: NotReady, or unreachable) for longer than
  the grace (the operator's ``--node-lost-grace-seconds``, or the job's
  ``kubetrain.dev/node-lost-grace-seconds``), or
- is **unhealthy for training**: one of the node conditions the platform names is True
  (``--unhealthy-node-conditions``: by default those of NVIDIA's NVSentinel and
  node-problem-detector), one of the taints it names is on the node
  (``--unhealthy-node-taints``), or the node's allocatable ``nvidia.com/gpu`` dropped
  below what the job's pods on it hold (the device plugin withdraws a GPU it finds
  unhealthy). These act at once: the platform has already decided.

The planner looks at the job's pods through :func:`view`: a pod lost with its node shows
as Failed, with reason ``NodeLost`` (the node is gone or not Ready) or ``NodeUnhealthy``
and the ``DisruptionTarget`` condition, its message naming the node and the signal ("node
gpu-7 NotReady for 62 s"). Every restart policy then treats it as the infrastructure
failure it is: counted against the job's infrastructure budget, never ``backoffLimit``,
and the job's gang restarts on other nodes.

A pod on a node that is not Ready cannot be deleted the usual way: nothing on the node
confirms that its containers stopped, so it stays Terminating and its name (which the
replacement needs) stays taken. Where the job allows it (``--force-delete-lost-pods``, or
the job's ``kubetrain.dev/safe-to-forcefully-delete: "true"``) :func:`finish` turns such a
deletion into a forced one (grace period 0), also for a pod already stuck Terminating
there, from a drain or the taint manager. The risk is why it is opt-in, as Kueue's is: a
node that is only partitioned still runs the old process, which may write to the job's
checkpoint beside its replacement. Without it the job waits for the node to come back
or be deleted, and says so.

Pure functions over the (trimmed) Node and Pod JSON; the operator's node informer
(``cluster_state``) hands :func:`view` the nodes of a job's pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.quantity import amount
from kubetrain.controller import podstate
from kubetrain.controller.decisions import Event, Plan, ref, soonest
from kubetrain.controller.model import Observed
from kubetrain.controller.node_rules import NodeRules

Obj = Mapping[str, Any]

#: The pod reasons a lost node gives its pods (``podstate.DISRUPTION_REASONS`` has both).
NODE_LOST = "NodeLost"
NODE_UNHEALTHY = "NodeUnhealthy"


@dataclass(frozen=True)
class Trouble:
    """Why node ``node`` cannot run the job's pods."""

    node: str
    reason: str  # NODE_LOST or NODE_UNHEALTHY
    signal: str  # for people: "node gpu-7 NotReady for 62 s"
    #: Seconds until the pods on it count as lost (0: now).
    due_in: float = 0.0

    @property
    def unreachable(self) -> bool:
        """Nothing on the node confirms a pod's end: deletions there hang."""
        return self.reason == NODE_LOST


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _conditions(node: Obj) -> list[Mapping[str, Any]]:
    found = ((node.get("status") or {}).get("conditions")) or []
    return [c for c in found if isinstance(c, Mapping)]


def held_gpus(pods: Sequence[Obj]) -> int:
    """The ``nvidia.com/gpu`` the pods' containers request (limits where no request)."""
    total = 0
    for pod in pods:
        for container in (pod.get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            value = (resources.get("requests") or {}).get(K.GPU_RESOURCE)
            if value is None:
                value = (resources.get("limits") or {}).get(K.GPU_RESOURCE)
            if value is not None:
                total += int(amount(value))
    return total


def assess(
    name: str, node: Obj | None, rules: NodeRules, now: datetime, pods: Sequence[Obj] = ()
) -> Trouble | None:
    """Node ``name`` (None: deleted) against ``rules``; ``pods`` are the job's active pods
    on it (their GPUs must fit its allocatable)."""
    if node is None:
        return Trouble(name, NODE_LOST, f"node {name} was deleted")
    for cond in _conditions(node):
        if cond.get("type") != "Ready" or cond.get("status") == "True":
            continue
        since = _parse_time(cond.get("lastTransitionTime"))
        waited = max(0.0, (now - since).total_seconds()) if since else 0.0
        state = "unreachable" if cond.get("status") == "Unknown" else "NotReady"
        signal = f"node {name} {state} for {waited:.0f} s"
        return Trouble(name, NODE_LOST, signal, max(0.0, rules.grace_seconds - waited))
    for cond in _conditions(node):
        if cond.get("type") in rules.conditions and cond.get("status") == "True":
            detail = str(cond.get("reason") or cond.get("message") or "").strip()
            signal = f"condition {cond['type']}=True on node {name}"
            return Trouble(name, NODE_UNHEALTHY, f"{signal} ({detail})" if detail else signal)
    for taint in (node.get("spec") or {}).get("taints") or []:
        if isinstance(taint, Mapping) and taint.get("key") in rules.taints:
            effect = taint.get("effect") or ""
            value = f"={taint['value']}" if taint.get("value") else ""
            signal = f"taint {taint['key']}{value}:{effect} on node {name}"
            return Trouble(name, NODE_UNHEALTHY, signal)
    allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(K.GPU_RESOURCE)
    held = held_gpus(pods)
    if held and allocatable is not None and int(amount(allocatable)) < held:
        signal = (
            f"node {name} has {allocatable} allocatable {K.GPU_RESOURCE}, fewer than the "
            f"{held} the job's pods there hold (a GPU was found unhealthy)"
        )
        return Trouble(name, NODE_UNHEALTHY, signal)
    return None


#: What the job's node annotations must hold.
EXPECTED = {
    K.NODE_LOST_GRACE_ANNOTATION: 'a whole number of seconds, e.g. "60"',
    K.FORCE_DELETE_ANNOTATION: '"true" or "false"',
}


def job_rules(
    annotations: Mapping[str, str], rules: NodeRules
) -> tuple[NodeRules, tuple[str, str] | None]:
    """``rules`` with the job's overrides, and the first annotation that is invalid
    (key, value) when one is: the job is then refused (InvalidSpec)."""
    grace = annotations.get(K.NODE_LOST_GRACE_ANNOTATION)
    if grace is not None:
        if not (isinstance(grace, str) and grace.isdigit()):
            return rules, (K.NODE_LOST_GRACE_ANNOTATION, str(grace))
        rules = replace(rules, grace_seconds=int(grace))
    force = annotations.get(K.FORCE_DELETE_ANNOTATION)
    if force is not None:
        if force not in ("true", "false"):
            return rules, (K.FORCE_DELETE_ANNOTATION, str(force))
        rules = replace(rules, force_delete=force == "true")
    return rules, None


def troubles(observed: Observed, rules: NodeRules, now: datetime) -> dict[str, Trouble]:
    """The troubled nodes of the job's pods (none when the operator does not watch nodes)."""
    if observed.nodes is None:
        return {}
    on: dict[str, list[Obj]] = {}
    for pod in observed.pods.values():
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not podstate.is_succeeded(pod):
            on.setdefault(str(node), []).append(pod)
    out = {}
    for node, pods in sorted(on.items()):
        active = [p for p in pods if podstate.is_active(p)]
        trouble = assess(node, observed.nodes.get(node), rules, now, active)
        if trouble is not None:
            out[node] = trouble
    return out


def _lost(pod: Obj, trouble: Trouble) -> dict[str, Any]:
    """``pod`` as it fares: Failed with its node, marked as a disruption."""
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    conditions.append({"type": "DisruptionTarget", "status": "True", "reason": trouble.reason})
    status.update(
        phase="Failed", reason=trouble.reason, message=trouble.signal, conditions=conditions
    )
    return {**pod, "status": status}


def view(observed: Observed, found: Mapping[str, Trouble]) -> Observed:
    """The job's children with its live pods on troubled nodes shown Failed (see the
    module docs); those whose grace is still running stay as they are."""
    if not found:
        return observed
    pods = dict(observed.pods)
    for name, pod in observed.pods.items():
        trouble = found.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if trouble is not None and not trouble.due_in and podstate.is_active(pod):
            pods[name] = _lost(pod, trouble)
    return replace(observed, pods=pods)


def finish(plan: Plan, observed: Observed, found: Mapping[str, Trouble], rules: NodeRules) -> None:
    """Deletions of pods on unreachable nodes become forced ones where ``rules`` allow
    (and pods already stuck Terminating there are force-deleted too), or an Event says
    what the job waits for; the job is looked at again when a grace runs out."""
    if not found:
        return
    due = [t.due_in for t in found.values() if t.due_in]
    plan.requeue_after = soonest(plan.requeue_after, *due)

    def unreachable_node(name: str) -> Trouble | None:
        pod = observed.pods.get(name)
        node = str(((pod or {}).get("spec") or {}).get("nodeName") or "")
        trouble = found.get(node)
        return trouble if trouble is not None and trouble.unreachable else None

    if rules.force_delete:
        planned = {d.name for d in plan.delete if d.kind == "Pod"}
        plan.delete = [
            replace(d, force=True) if d.kind == "Pod" and unreachable_node(d.name) else d
            for d in plan.delete
        ]
        # A batch Job deleted now (an MPI launcher's) leaves its pod to the garbage
        # collector: on an unreachable node it would hang there, so it goes now.
        jobs = {d.uid for d in plan.delete if d.kind == "Job"}
        for name, pod in sorted(observed.pods.items()):
            trouble = unreachable_node(name)
            if trouble is None or trouble.due_in or name in planned:
                continue
            if podstate.is_deleting(pod) or _owner_uid(pod) in jobs:
                plan.delete.append(replace(ref("Pod", pod), force=True))
        return
    for name, pod in sorted(observed.pods.items()):
        trouble = unreachable_node(name)
        if trouble is None or trouble.due_in or not podstate.is_deleting(pod):
            continue
        plan.events.append(
            Event(
                "Warning",
                "WaitingForLostNode",
                f"pod {name} stays Terminating on node {trouble.node} ({trouble.signal}): "
                "nothing there confirms it stopped; the job goes on once the node is back "
                f'or deleted. Set {K.FORCE_DELETE_ANNOTATION}: "true" on the job (or '
                "--force-delete-lost-pods on the operator) to force-delete it, if the "
                "node's processes cannot harm the job.",
                key=f"lost-node-wait/{podstate.uid(pod)}",
            )
        )


def _owner_uid(pod: Obj) -> str:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((str(o.get("uid")) for o in owners if o.get("controller")), "")
