"""Ending fake pods on demand.

On the local control plane no container runs: kwok plays the kubelet (see
``cluster/stages``). A pod bound to a fake node becomes Running and Ready at once and
stays so until it is annotated with an exit code; then its containers exit with that
code and the given reason, the way the kubelet would report it:

- restartPolicy Never, or OnFailure with code 0: the pod ends, phase Succeeded for
  code 0 and Failed otherwise (so a batch Job's controller counts it);
- restartPolicy Always, or OnFailure with a non-zero code: the containers restart in
  place (restartCount + 1, lastState.terminated holds the code and reason) and the
  annotations are removed so the next exit can be requested the same way.

A node's kubelet can be made to vanish too (:func:`lose_node`): kwok stops reporting the
node Ready, the node is set NotReady (or Unknown, as the node lifecycle controller says of
an unreachable node), and the deletion of every pod on it hangs, as it does on a real
node nobody hears from.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

#: On a fake node: kwok no longer reports it Ready (a test sets its conditions), as if its
#: kubelet were gone. On a pod: its deletion is never confirmed (it stays Terminating).
NODE_LOST_ANNOTATION = "kubetrain.dev/fake-node-lost"
KUBELET_GONE_ANNOTATION = "kubetrain.dev/fake-kubelet-gone"
EXIT_CODE_ANNOTATION = "kubetrain.dev/fake-exit-code"
REASON_ANNOTATION = "kubetrain.dev/fake-reason"
MESSAGE_ANNOTATION = "kubetrain.dev/fake-message"


def exit_annotations(
    exit_code: int, reason: str | None = None, message: str | None = None
) -> dict[str, str]:
    """The annotations that make a running fake pod's containers exit.

    ``reason`` defaults to ``Completed`` for code 0 and ``Error`` otherwise, as the
    kubelet reports a process that ended by itself; pass e.g. ``OOMKilled`` for 137.
    """
    if isinstance(exit_code, bool) or not isinstance(exit_code, int):
        raise TypeError(f"exit_code must be an int, got {type(exit_code).__name__}")
    if not 0 <= exit_code <= 255:
        raise ValueError(f"exit_code is {exit_code}: a process exit code is 0..255")
    if reason is not None and not reason:
        raise ValueError("reason is empty: pass a CamelCase reason such as OOMKilled, or None")
    annotations = {EXIT_CODE_ANNOTATION: str(exit_code)}
    if reason is not None:
        annotations[REASON_ANNOTATION] = reason
    if message is not None:
        annotations[MESSAGE_ANNOTATION] = message
    return annotations


def exit_patch(
    exit_code: int, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """A merge patch for the pod that requests the exit (see ``exit_annotations``)."""
    return {"metadata": {"annotations": exit_annotations(exit_code, reason, message)}}


def make_pod_exit(
    core_v1: Any,
    namespace: str,
    name: str,
    exit_code: int,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """Annotate pod ``namespace/name`` through a ``kubernetes.client.CoreV1Api``."""
    core_v1.patch_namespaced_pod(name, namespace, exit_patch(exit_code, reason, message))


def lose_node(core_v1: Any, name: str, *, status: str = "False") -> list[tuple[str, str]]:
    """Make fake node ``name`` lost: Ready ``status`` (False: NotReady, Unknown:
    unreachable) from now on, and the pods on it never confirm their deletion. Returns
    the (namespace, name) of those pods."""
    core_v1.patch_node(name, {"metadata": {"annotations": {NODE_LOST_ANNOTATION: "true"}}})
    pods = core_v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    gone = {"metadata": {"annotations": {KUBELET_GONE_ANNOTATION: "true"}}}
    for pod in pods:
        core_v1.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace, gone)
    ready = {
        "type": "Ready",
        "status": status,
        "reason": "KubeletStopped" if status == "False" else "NodeStatusUnknown",
        "message": "the fake kubelet is gone",
        "lastTransitionTime": _now(),
        "lastHeartbeatTime": _now(),
    }
    core_v1.patch_node_status(name, {"status": {"conditions": [ready]}})
    return [(p.metadata.namespace, p.metadata.name) for p in pods]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
