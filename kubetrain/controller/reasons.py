"""Every condition and Event reason the operator writes, with its human message.

Reasons are CamelCase constants. The lifecycle reasons follow upstream's
``<Kind><Verb>`` pattern (``PyTorchJobRunning``, ``MPIJobSucceeded``) so that tools
written for the Kubeflow operators read them unchanged; the failure reasons say *why* a
job failed (``BackoffLimitExceeded``, ``DeadlineExceeded``...), which upstream folded
into ``<Kind>Failed``. Messages are built here and nowhere else.
"""

from __future__ import annotations

from enum import StrEnum

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

# The reason strings live with the other wire keys; the operator's code reads them here.
from kubetrain.api.keys import INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION, MAX_RESTARTS_ANNOTATION
from kubetrain.api.keys import (
    INFRASTRUCTURE_RESTART_LIMIT_EXCEEDED as INFRASTRUCTURE_RESTART_LIMIT_EXCEEDED,
)
from kubetrain.api.keys import (
    INVALID_SPEC as INVALID_SPEC,
)
from kubetrain.api.keys import (
    MANAGED_ELSEWHERE as MANAGED_ELSEWHERE,
)
from kubetrain.api.keys import (
    RUNTIME_NOT_FOUND as RUNTIME_NOT_FOUND,
)
from kubetrain.api.keys import (
    SCALED_DOWN as SCALED_DOWN,
)
from kubetrain.api.keys import (
    SCALED_UP as SCALED_UP,
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
from kubetrain.api.kinds import TRAINJOB

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


def creating_children(pods: int, total: int, batch: int) -> str:
    """Progress of a job whose children are created over several reconciles."""
    return f"Creating its children, {batch} per pass: {pods:,} of {total:,} pods so far."


def running(kind: str, name: str) -> str:
    return f"{kind} {name} is running."


def succeeded(kind: str, name: str, detail: str) -> str:
    return f"{kind} {name} succeeded: {detail}."


#: Where a TrainJob keeps what a v1 job has under ``spec.runPolicy`` (messages name the
#: field the user edits: a TrainJob has no runPolicy).
_TRAINJOB_FIELDS = {
    "suspend": "spec.suspend",
    "activeDeadlineSeconds": "spec.activeDeadlineSeconds",
    "managedBy": "spec.managedBy",
    "backoffLimit": (
        "the backoffLimit of its runtime's Job template "
        "(spec.template.spec.replicatedJobs[].template.spec.backoffLimit)"
    ),
}


def run_policy_field(kind: str, field: str) -> str:
    """The field ``field`` of ``runPolicy`` as a job of ``kind`` spells it."""
    if kind == TRAINJOB.kind:
        return _TRAINJOB_FIELDS[field]
    return f"spec.runPolicy.{field}"


def suspended(kind: str, name: str) -> str:
    return (
        f"{kind} {name} is suspended: its pods are deleted until "
        f"{run_policy_field(kind, 'suspend')} is false."
    )


def resumed(kind: str, name: str) -> str:
    return f"{kind} {name} is resumed: its children are rebuilt from the current spec."


# Failure and restart messages start the way upstream's do ("<Kind> <name> is failed
# because 1 Worker replica(s) failed"), so scripts that grep for the job's name and the
# replica type keep working; kubetrain's precise cause follows the colon.


def _replica_failed(kind: str, name: str, replica_type: str, verb: str = "is failed") -> str:
    return f"{kind} {name} {verb} because 1 {replica_type} replica(s) failed"


def _failed(kind: str, name: str, replica_type: str) -> str:
    """The start of a failure message: the replica type's, or the job's when none is known."""
    return _replica_failed(kind, name, replica_type) if replica_type else f"{kind} {name} is failed"


def restarting(
    kind: str, name: str, replica_type: str, pod: str, cause: str, used: int, limit: int | None
) -> str:
    budget = f"{used} of {limit}" if limit is not None else f"{used} (no backoffLimit)"
    return (
        f"{_replica_failed(kind, name, replica_type, 'is restarting')}: pod {pod} is "
        f"recreated after it failed ({cause}); restarts used: {budget}."
    )


#: The Event of a job running again after a gang restart.
RECOVERED = "Recovered"


def recovered(kind: str, name: str, attempt: int, reason: str, took: str) -> str:
    cause = f" ({reason})" if reason else ""
    return (
        f"{kind} {name} is running again{took} after its gang restart{cause}, as attempt {attempt}."
    )


#: Between a Restarting condition's reason for the restart and what its new pods wait for.
RESTART_WAITING = " Waiting: "


def infrastructure_restarting(
    kind: str, name: str, replica_type: str, pod: str, cause: str, used: int, limit: int
) -> str:
    return (
        f"{_replica_failed(kind, name, replica_type, 'is restarting')}: pod {pod} is "
        f"recreated after an infrastructure failure ({cause}); infrastructure restarts "
        f"used: {used} of {limit}, backoffLimit untouched."
    )


def infrastructure_restarts_exceeded(
    kind: str, name: str, replica_type: str, pod: str, cause: str, limit: int
) -> str:
    failed = _failed(kind, name, replica_type)
    return (
        f"{failed} and its infrastructure restarts ({INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION} "
        f"{limit}) are used up: pod {pod} failed ({cause}), an infrastructure failure. "
        "Raise the annotation if the cluster fails this often."
    )


def restarted_in_place(
    kind: str, name: str, replica_type: str, pod: str, cause: str, used: int, limit: int | None
) -> str:
    budget = f"{used} of {limit}" if limit is not None else f"{used} (no backoffLimit)"
    return (
        f"{_replica_failed(kind, name, replica_type, 'is restarting')}: pod {pod} restarted "
        f"a container ({cause}); restarts used: {budget}."
    )


def backoff_exceeded(
    kind: str, name: str, replica_type: str, pod: str, cause: str, limit: int
) -> str:
    failed = _failed(kind, name, replica_type)
    return (
        f"{failed} and backoffLimit {limit} is used up: "
        f"pod {pod} failed ({cause}). Raise {run_policy_field(kind, 'backoffLimit')} to "
        "allow more restarts."
    )


def launcher_failed(kind: str, name: str, launcher: str, detail: str) -> str:
    return f"{_replica_failed(kind, name, 'Launcher')}: launcher Job {launcher} failed: {detail}"


def deadline_exceeded(kind: str, name: str, seconds: int) -> str:
    return (
        f"{kind} {name} has failed because it was active longer than specified deadline: "
        f"it ran longer than {run_policy_field(kind, 'activeDeadlineSeconds')} ({seconds}s) since "
        "status.startTime; its active pods are deleted."
    )


def startup_timeout(
    kind: str,
    name: str,
    replica_types: tuple[str, ...],
    waiting: str,
    needed: str,
    seconds: int,
    detail: str,
) -> str:
    types = "/".join(replica_types)
    return (
        f"{kind} {name} is failed because its {types} replica(s) could not start: {waiting} "
        f"waited {seconds}s for {needed} to be Ready: {detail}. Fix the cause, or raise the "
        f"operator's --startup-timeout-seconds (or the job's annotation "
        f"{STARTUP_TIMEOUT_ANNOTATION})."
    )


def startup_waiting(waiting: str, needed: str) -> str:
    return f"Waiting for {needed} to be Ready before creating {waiting}."


GANG_RESTART = "GangRestart"


def gang_starts_again(attempt: int) -> str:
    """What every gang restart's message says of its attempt (and only theirs)."""
    return f"the gang starts again as attempt {attempt};"


def gang_restarting(
    kind: str, name: str, pod: str, cause: str, attempt: int, used: int, limit: int | None
) -> str:
    budget = f"{used} of {limit}" if limit is not None else f"{used} (no limit)"
    return (
        f"{kind} {name} is restarting as a gang: pod {pod} failed ({cause}), so every pod "
        f"is deleted and {gang_starts_again(attempt)} gang restarts used: {budget}."
    )


def gang_infrastructure_restarting(
    kind: str, name: str, pod: str, cause: str, attempt: int, used: int, limit: int
) -> str:
    return (
        f"{kind} {name} is restarting as a gang: pod {pod} failed ({cause}), an "
        f"infrastructure failure, so every pod is deleted and {gang_starts_again(attempt)} "
        f"infrastructure restarts used: {used} of {limit}, the gang's restart limit untouched."
    )


def replica_restarts_exceeded(
    kind: str, name: str, replica_type: str, pod: str, cause: str, limit: int
) -> str:
    return (
        f"{_replica_failed(kind, name, replica_type)} and its restarts allowed "
        f"({MAX_RESTARTS_ANNOTATION} {limit}) are used up: pod {pod} failed ({cause})."
    )


def gang_restarts_exceeded(kind: str, name: str, pod: str, cause: str, limit: int) -> str:
    field = (
        "its runtime's spec.template.spec.failurePolicy.maxRestarts"
        if kind == TRAINJOB.kind
        else run_policy_field(kind, "backoffLimit")
    )
    return (
        f"{kind} {name} is failed: pod {pod} failed ({cause}) and the gang restarts allowed "
        f"({limit}) are used up. Raise {field} to allow more."
    )


def gang_waiting(scheduler: str, group: str) -> str:
    return (
        f"Waiting for the gang scheduler ({scheduler}) to place every pod of PodGroup "
        f"{group} together."
    )


def pod_failed(kind: str, name: str, replica_type: str, pod: str, cause: str, policy: str) -> str:
    return (
        f"{_replica_failed(kind, name, replica_type)}: pod {pod} failed ({cause}) and its "
        f"restartPolicy {policy} does not retry it."
    )


def ttl_expired(kind: str, name: str) -> str:
    return f"{kind} {name} finished and its TTL passed"


def managed_elsewhere(kind: str, name: str, controller: str) -> str:
    return (
        f"{kind} {name} has {run_policy_field(kind, 'managedBy')} {controller}: that "
        "controller runs it, and kubetrain leaves it alone (no children, no status)."
    )


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


# -- hangs (policies/hang) --------------------------------------------------------------------

HANG_RESTART = "HangRestart"
#: The restart reason (``KUBETRAIN_RESTART_REASON``) of a gang that stopped reporting, and
#: of one that never reported within its startup timeout.
HANG = "Hang"
NO_PROGRESS_REPORT = "NoProgressReport"


def last_report(step: int | None, at: str, node: str | None, pod: str | None) -> str:
    """``step 1,234 at 12:03:10 from node-1 (pod p)``, as far as the report says."""
    where = f" from {node}" if node else ""
    who = f" (pod {pod})" if pod else ""
    what = f"step {step:,} " if step is not None else "a report "
    return f"{what}at {at[11:19] if len(at) >= 19 else at}{where}{who}"


def stopped_reporting(seconds: float, last: str) -> str:
    return f"no progress report for {seconds:.0f} s; last: {last}"


def never_reported(seconds: float, again: bool) -> str:
    when = "since its pods run again" if again else "since its pods started running"
    return f"no progress report {when}, {seconds:.0f} s ago (its startup timeout)"


def resume_point(checkpoint_step: int | None, redo: int | None) -> str:
    """Where a restarted gang resumes, as the job's own reports say."""
    if checkpoint_step is None:
        return "The job reported no checkpoint: it resumes from whatever it saved."
    steps = f" ({redo:,} steps to redo)" if redo is not None else ""
    return f"It resumes from checkpoint step {checkpoint_step:,}{steps}."


def hang_restarting(
    kind: str, name: str, silence: str, attempt: int, used: int, limit: int, resume: str
) -> str:
    return (
        f"{kind} {name} is restarting as a gang: {silence}, so every pod is deleted and "
        f"{gang_starts_again(attempt)} hang restarts used: {used} of {limit}. {resume}"
    )


def hang_restarts_exceeded(kind: str, name: str, silence: str, limit: int, key: str) -> str:
    return (
        f"{kind} {name} is failed: {silence}, and the hang restarts allowed ({limit}) are "
        f"used up. Find what its ranks wait for, or raise metadata.annotations[{key}]."
    )
