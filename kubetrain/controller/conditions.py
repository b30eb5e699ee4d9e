"""Job conditions with upstream's rules (training-operator ``pkg/util/status.go``):

- a condition is appended when its type is new or its status or reason changed, so the
  last condition is the most recent change (the ``State`` printer column reads it);
- Running and Restarting replace each other;
- Succeeded and Failed turn Running to False;
- nothing changes once the job has Failed or Succeeded.

A changed message alone updates the condition in place (no new transition).
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus

TERMINAL = (ConditionType.SUCCEEDED, ConditionType.FAILED)


def format_time(moment: datetime) -> str:
    """RFC 3339 with second precision, as Kubernetes serializes ``metav1.Time``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    """Parse an RFC 3339 time; None for None or an unparsable value."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def get(status: JobStatus | None, kind: ConditionType) -> JobCondition | None:
    """The condition of type ``kind``, if any."""
    for cond in (status.conditions if status else None) or []:
        if cond.type == kind:
            return cond
    return None


def is_true(status: JobStatus | None, kind: ConditionType) -> bool:
    """Whether condition ``kind`` is present and True."""
    cond = get(status, kind)
    return cond is not None and cond.status == ConditionStatus.TRUE


def finished(status: JobStatus | None) -> ConditionType | None:
    """Succeeded or Failed when the job has ended, else None."""
    for kind in TERMINAL:
        if is_true(status, kind):
            return kind
    return None


def set_condition(
    conditions: list[JobCondition],
    kind: ConditionType,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> list[JobCondition]:
    """The conditions after setting one (a new list; see the module rules)."""
    stamp = format_time(now)
    current = next((c for c in conditions if c.type == kind), None)
    if current is not None and current.status == status and current.reason == reason:
        if current.message == message:
            return list(conditions)
        updated = current.model_copy(update={"message": message, "last_update_time": stamp})
        return [updated if c is current else c for c in conditions]
    transition = stamp
    if current is not None and current.status == status and current.last_transition_time:
        transition = current.last_transition_time
    new = JobCondition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_update_time=stamp,
        last_transition_time=transition,
    )
    kept: list[JobCondition] = []
    for cond in conditions:
        if cond.type == kind:
            continue
        if {kind, cond.type} == {ConditionType.RUNNING, ConditionType.RESTARTING}:
            continue
        if (
            kind in TERMINAL
            and status == ConditionStatus.TRUE
            and cond.type == ConditionType.RUNNING
            and cond.status != ConditionStatus.FALSE
        ):
            cond = cond.model_copy(
                update={
                    "status": ConditionStatus.FALSE,
                    "last_update_time": stamp,
                    "last_transition_time": stamp,
                }
            )
        kept.append(cond)
    kept.append(new)
    return kept


def set_false(
    conditions: list[JobCondition],
    kind: ConditionType,
    reason: str,
    message: str,
    now: datetime,
) -> list[JobCondition]:
    """Turn an existing condition False in place (no-op when absent or already False)."""
    stamp = format_time(now)
    out = []
    for cond in conditions:
        if cond.type == kind and cond.status != ConditionStatus.FALSE:
            cond = cond.model_copy(
                update={
                    "status": ConditionStatus.FALSE,
                    "reason": reason,
                    "message": message,
                    "last_update_time": stamp,
                    "last_transition_time": stamp,
                }
            )
        out.append(cond)
    return out


def waiting_since(status: JobStatus, created: datetime | None) -> datetime | None:
    """When the job's current wait began: its creation, or its last resume (the
    Suspended condition turning False), whichever is later."""
    resumed = get(status, ConditionType.SUSPENDED)
    if resumed is not None and resumed.status == ConditionStatus.FALSE:
        at = parse_time(resumed.last_transition_time)
        if at is not None and (created is None or at > created):
            return at
    return created
