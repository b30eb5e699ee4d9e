"""What a pod is doing, read from its (trimmed) status: phase, readiness, why it failed,
how often its containers restarted, and what keeps it from running.

Pure functions over the camelCase JSON the API server serves, so the policies and
plugins can be table-tested with hand-written pods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.reasons import POD_PROBLEM_REASONS

Obj = Mapping[str, Any]

ACTIVE_PHASES = frozenset({"Pending", "Running", "Unknown"})
#: Pod-level reasons that mean the pod was disrupted, not that the program failed.
DISRUPTION_REASONS = frozenset(
    {
        "Evicted",
        "Preempting",
        "NodeLost",
        "NodeShutdown",
        "NodeUnhealthy",
        "Terminated",
        "UnexpectedAdmissionError",
        # The DisruptionTarget condition's reasons.
        "PreemptionByScheduler",
        "DeletionByTaintManager",
        "EvictionByEvictionAPI",
        "DeletionByPodGC",
        "TerminationByKubelet",
    }
)
#: Container waiting reasons that are problems (not a normal start).
WAITING_PROBLEMS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)


def _status(pod: Obj) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if isinstance(status, Mapping) else {}


def name(obj: Obj) -> str:
    """``metadata.name``."""
    return str((obj.get("metadata") or {}).get("name", ""))


def uid(obj: Obj) -> str:
    """``metadata.uid``."""
    return str((obj.get("metadata") or {}).get("uid", ""))


def phase(pod: Obj) -> str:
    """``status.phase`` (Pending when absent)."""
    return str(_status(pod).get("phase") or "Pending")


def is_deleting(obj: Obj) -> bool:
    """Whether the object has a deletionTimestamp."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def is_unbound(pod: Obj) -> bool:
    """Not placed on a node yet (and not finished)."""
    return not (pod.get("spec") or {}).get("nodeName") and phase(pod) == "Pending"


def is_active(pod: Obj) -> bool:
    """Pending, Running or Unknown, and not being deleted."""
    return phase(pod) in ACTIVE_PHASES and not is_deleting(pod)


def is_running(pod: Obj) -> bool:
    """Running and not being deleted."""
    return phase(pod) == "Running" and not is_deleting(pod)


def is_succeeded(pod: Obj) -> bool:
    """Phase Succeeded."""
    return phase(pod) == "Succeeded"


def is_failed(pod: Obj) -> bool:
    """Phase Failed."""
    return phase(pod) == "Failed"


def condition(pod: Obj, kind: str) -> Mapping[str, Any] | None:
    """The pod condition of type ``kind``, if any."""
    for cond in _status(pod).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def is_ready(pod: Obj) -> bool:
    """Running with the Ready condition True (what the startup gate waits for)."""
    cond = condition(pod, "Ready")
    return is_running(pod) and cond is not None and cond.get("status") == "True"


def _containers(pod: Obj, *, init: bool = True) -> Iterator[Mapping[str, Any]]:
    status = _status(pod)
    keys = ("initContainerStatuses", "containerStatuses") if init else ("containerStatuses",)
    for key in keys:
        for cs in status.get(key) or []:
            if isinstance(cs, Mapping):
                yield cs


def restart_count(pod: Obj) -> int:
    """Container restarts the kubelet did in place (init and app containers)."""
    return sum(int(cs.get("restartCount") or 0) for cs in _containers(pod))


@dataclass(frozen=True)
class Termination:
    """How a container or pod ended."""

    exit_code: int | None
    reason: str
    message: str = ""
    container: str = ""

    def describe(self) -> str:
        parts = []
        if self.container:
            parts.append(f"container {self.container}")
        if self.exit_code is not None:
            parts.append(f"exit code {self.exit_code}")
        text = " ".join(parts)
        reason = self.reason or "Error"
        text = f"{text} ({reason})" if text else reason
        if self.message:
            text += f": {self.message.strip()[:200]}"
        return text


def failure(pod: Obj, main_container: str | None = None) -> Termination:
    """Why a Failed pod failed: a disruption (Evicted...) or its failed container's exit.

    Among failed containers, the one named ``main_container`` is preferred.
    """
    status = _status(pod)
    reason = str(status.get("reason") or "")
    if reason in DISRUPTION_REASONS or _disrupted(pod):
        marked = condition(pod, "DisruptionTarget") or {}
        reason = reason or str(marked.get("reason") or "DisruptionTarget")
        return Termination(None, reason, str(status.get("message") or marked.get("message") or ""))
    failed: list[Termination] = []
    for cs in _containers(pod):
        terminated = (cs.get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping) and int(terminated.get("exitCode") or 0) != 0:
            failed.append(
                Termination(
                    int(terminated.get("exitCode") or 0),
                    str(terminated.get("reason") or "Error"),
                    str(terminated.get("message") or ""),
                    str(cs.get("name") or ""),
                )
            )
    if failed:
        preferred = [t for t in failed if t.container == main_container]
        return (preferred or failed)[0]
    return Termination(None, reason or "Failed", str(status.get("message") or ""))


def _disrupted(pod: Obj) -> bool:
    cond = condition(pod, "DisruptionTarget")
    return cond is not None and cond.get("status") == "True"


def is_disrupted(pod: Obj) -> bool:
    """Failed as a whole by the cluster, or being deleted with the ``DisruptionTarget``
    condition (a drain's eviction, the taint manager, preemption) before it ends."""
    if is_failed(pod):
        return is_disruption(failure(pod))
    return is_deleting(pod) and _disrupted(pod)


def is_disruption(termination: Termination) -> bool:
    """The pod was evicted or preempted: not the program's fault."""
    return termination.exit_code is None and (
        termination.reason in DISRUPTION_REASONS or termination.reason == "DisruptionTarget"
    )


def last_restart(pod: Obj) -> Termination | None:
    """The most recent in-place container exit (``lastState.terminated``), if any."""
    latest: tuple[str, Termination] | None = None
    for cs in _containers(pod):
        if not int(cs.get("restartCount") or 0):
            continue
        terminated = (cs.get("lastState") or {}).get("terminated")
        if not isinstance(terminated, Mapping):
            continue
        finished = str(terminated.get("finishedAt") or "")
        term = Termination(
            int(terminated.get("exitCode") or 0),
            str(terminated.get("reason") or "Error"),
            str(terminated.get("message") or ""),
            str(cs.get("name") or ""),
        )
        if latest is None or finished >= latest[0]:
            latest = (finished, term)
    return latest[1] if latest else None


def restarted_at(pod: Obj, container: str) -> str:
    """When ``container`` last ended and was restarted in place (its ``lastState``'s
    ``finishedAt``), "" when it never was."""
    for cs in _containers(pod, init=False):
        if cs.get("name") != container or not int(cs.get("restartCount") or 0):
            continue
        terminated = (cs.get("lastState") or {}).get("terminated")
        if isinstance(terminated, Mapping):
            return str(terminated.get("finishedAt") or "")
    return ""


#: The PodScheduled reason the API server sets on a pod created with scheduling gates (it
#: stays until the scheduler binds the pod, after the gates are gone).
SCHEDULING_GATED = "SchedulingGated"


def foreign_gates(pod: Obj) -> list[str]:
    """The pod's scheduling gates other than the operator's own startup gate (a queue's
    admission gate, a user's): those hold the pod for reasons the job does not know of."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    names = (str(g.get("name")) for g in gates if isinstance(g, Mapping))
    return [name for name in names if name != K.STARTUP_GATE]


@dataclass(frozen=True)
class Problem:
    """Something that keeps a pod from running, as the kubelet or scheduler said it."""

    reason: str
    message: str

    def describe(self, pod_name: str) -> str:
        text = f"pod {pod_name} {self.reason}"
        return f"{text}: {self.message.strip()[:300]}" if self.message else text


def problems(pod: Obj) -> list[Problem]:
    """The pod's problems, worst first (the order of ``POD_PROBLEM_REASONS``).

    ``SchedulingGated`` is one only while a gate other than the operator's own holds the
    pod: the startup gate is the planned wait the Created condition already states, and
    the condition outlives the gates until the scheduler binds the pod."""
    found: list[Problem] = []
    status = _status(pod)
    if str(status.get("reason") or "") in POD_PROBLEM_REASONS:
        found.append(Problem(str(status["reason"]), str(status.get("message") or "")))
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        reason = str(scheduled.get("reason") or "Unschedulable")
        message = str(scheduled.get("message") or "")
        if reason != SCHEDULING_GATED:
            found.append(Problem(reason, message))
        elif gates := foreign_gates(pod):
            held = f"scheduling gates: {', '.join(gates)}"
            found.append(Problem(reason, f"{message} ({held})" if message else held))
    for cs in _containers(pod):
        state = cs.get("state") or {}
        waiting = state.get("waiting")
        if isinstance(waiting, Mapping) and waiting.get("reason") in WAITING_PROBLEMS:
            message = f"container {cs.get('name')}: {waiting.get('message') or ''}".rstrip(": ")
            last = (cs.get("lastState") or {}).get("terminated")
            if isinstance(last, Mapping) and last.get("reason"):
                message += f" (last exit: code {last.get('exitCode')}, {last.get('reason')})"
            found.append(Problem(str(waiting["reason"]), message))
        terminated = state.get("terminated")
        if isinstance(terminated, Mapping) and terminated.get("reason") == "OOMKilled":
            found.append(Problem("OOMKilled", f"container {cs.get('name')} ran out of memory"))
    order = {reason: i for i, reason in enumerate(POD_PROBLEM_REASONS)}
    unique = {p.reason: p for p in reversed(found)}
    return sorted(unique.values(), key=lambda p: order.get(p.reason, len(order)))
