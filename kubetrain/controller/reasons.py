"""Every condition and Event reason the operator writes, with its human message.

Reasons are CamelCase constants. The lifecycle reasons follow upstream's
``<Kind><Verb>`` pattern (``PyTorchJobRunning``, ``MPIJobSucceeded``) so that tools
written for the Kubeflow operators read them unchanged; the failure reasons say *why* a
job failed (``BackoffLimitExceeded``, ``DeadlineExceeded``...), which upstream folded
into ``<Kind>Failed``. Messages are built here and nowhere else.
"""

from __future__ import annotations

from enum import StrEnum

# The reason strings live with the other wire keys; the operator's code reads them here.
from kubetrain.api.keys import (
    BACKOFF_LIMIT_EXCEEDED as BACKOFF_LIMIT_EXCEEDED,
)
from kubetrain.api.keys import (
    CHILD_NAME_CONFLICT as CHILD_NAME_CONFLICT,
)
from kubetrain.api.keys import (
    CHILD_REFUSED as CHILD_REFUSED,
)
from kubetrain.api.keys import (
    DEADLINE_EXCEEDED as DEADLINE_EXCEEDED,
)
from kubetrain.api.keys import (
    INVALID_SPEC as INVALID_SPEC,
)
from kubetrain.api.keys import (
    MANAGED_ELSEWHERE as MANAGED_ELSEWHERE,
)
from kubetrain.api.keys import (
    STARTUP_TIMEOUT as STARTUP_TIMEOUT,
)
from kubetrain.api.keys import (
    STARTUP_TIMEOUT_ANNOTATION as STARTUP_TIMEOUT_ANNOTATION,
)
from kubetrain.api.keys import (
    STARTUP_WAITING as STARTUP_WAITING,
)
from kubetrain.api.keys import (
    TTL_EXPIRED as TTL_EXPIRED,
)

#: Event messages are truncated to this many characters (the API server's limit is 1 KiB).
MAX_EVENT_MESSAGE = 1024


class Verb(StrEnum):
    """The lifecycle verbs of upstream's ``<Kind><Verb>`` reasons."""

    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    RESUMED = "Resumed"
    EVICTED = "Evicted"


def lifecycle(kind: str, verb: Verb) -> str:
    """``<Kind><Verb>``, e.g. ``lifecycle("TFJob", Verb.RUNNING) == "TFJobRunning"``."""
    return f"{kind}{verb.value}"


#: Container and pod reasons surfaced in condition messages and Events, worst first.
POD_PROBLEM_REASONS = (
    "OOMKilled",
    "Evicted",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
    "Unschedulable",
    "ContainerStatusUnknown",
    "DeadlineExceeded",
    "NodeLost",
    "Preempting",
)


def created(kind: str, name: str) -> str:
    return f"{kind} {name} is created."


def running(kind: str, name: str) -> str:
    return f"{kind} {name} is running."


def succeeded(kind: str, name: str, detail: str) -> str:
    return f"{kind} {name} succeeded: {detail}."


def suspended(kind: str, name: str) -> str:
    return (
        f"{kind} {name} is suspended: its pods are deleted until spec.runPolicy.suspend is false."
    )


def resumed(kind: str, name: str) -> str:
    return f"{kind} {name} is resumed: its children are rebuilt from the current spec."


def restarting(pod: str, cause: str, used: int, limit: int | None) -> str:
    budget = f"{used} of {limit}" if limit is not None else f"{used} (no backoffLimit)"
    return f"pod {pod} is recreated after it failed ({cause}); restarts used: {budget}."


def restarted_in_place(pod: str, cause: str, used: int, limit: int | None) -> str:
    budget = f"{used} of {limit}" if limit is not None else f"{used} (no backoffLimit)"
    return f"pod {pod} restarted a container ({cause}); restarts used: {budget}."


def backoff_exceeded(pod: str, cause: str, limit: int) -> str:
    return (
        f"pod {pod} failed ({cause}) and backoffLimit {limit} is used up: "
        "raise spec.runPolicy.backoffLimit to allow more restarts."
    )


def deadline_exceeded(seconds: int) -> str:
    return (
        f"the job ran longer than spec.runPolicy.activeDeadlineSeconds ({seconds}s) "
        "since status.startTime; its active pods are deleted."
    )


def startup_timeout(waiting: str, needed: str, seconds: int, detail: str) -> str:
    return (
        f"{waiting} waited {seconds}s for {needed} to be Ready: {detail}. Fix the cause, or "
        f"raise the operator's --startup-timeout-seconds (or the job's annotation "
        f"{STARTUP_TIMEOUT_ANNOTATION})."
    )


def startup_waiting(waiting: str, needed: str) -> str:
    return f"Waiting for {needed} to be Ready before creating {waiting}."


def pod_failed(pod: str, cause: str, policy: str) -> str:
    return f"pod {pod} failed ({cause}) and its restartPolicy {policy} does not retry it."


def invalid(detail: str) -> str:
    return f"the job is invalid and will not be run: {detail}"


def child_name_conflict(kind: str, namespace: str, name: str, holder: str) -> str:
    return (
        f"{kind} {namespace}/{name} already exists and is {holder}; the operator neither "
        "adopts nor deletes objects it did not create. Delete or rename that object, or "
        "give the job another name."
    )


def waiting_for_predecessor(kind: str, namespace: str, name: str, holder: str) -> str:
    return (
        f"{kind} {namespace}/{name} is {holder}: waiting for garbage collection to "
        "remove it before creating this job's own."
    )


def child_refused(what: str, refusal: str, detail: str, attempt: int, limit: int) -> str:
    if refusal == "policy":
        after = f"try {attempt} of {limit}; the job fails if the spec stays refused"
    elif refusal == "quota":
        after = f"try {attempt}; retried with backoff until the quota frees up"
    else:
        after = f"try {attempt}; grant the operator this right (see its ClusterRole)"
    return f"the API server refused {what} ({after}): {detail}"


def truncate(message: str, limit: int = MAX_EVENT_MESSAGE) -> str:
    """``message`` cut to ``limit`` characters, marking the cut."""
    if len(message) <= limit:
        return message
    return message[: limit - 3] + "..."
