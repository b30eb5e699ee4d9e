"""An invalid job (the typed API or its plugin refuses it) fails at once with
``InvalidSpec`` (or the plugin's reason, e.g. ``RuntimeNotFound``) and every problem in
the message; it is never run, and a job that had already ended is left as it is. A job
its plugin may yet be able to read (a TrainJob whose runtime is on its way) waits, its
Created condition saying why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import ConditionChange, Decision
from kubetrain.controller.model import Outcome

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: Problems quoted in the condition message.
QUOTED_PROBLEMS = 10


def decide(draft: Draft) -> Decision | None:
    """Fail an invalid job (None: the job is valid)."""
    if draft.job is not None:
        return None
    if draft.finished:
        return Decision(final=True)
    detail = "; ".join(str(e) for e in draft.errors[:QUOTED_PROBLEMS])
    loaded = draft.loaded
    if loaded.retry_after is not None:
        reason = R.lifecycle(draft.kind, R.Verb.CREATED)
        message = f"{R.created(draft.kind, draft.name)} Waiting: {detail}"
        return Decision(
            conditions=[
                ConditionChange(ConditionType.CREATED, ConditionStatus.TRUE, reason, message)
            ],
            metrics=[] if draft.has(ConditionType.CREATED) else ["created"],
            requeue_after=loaded.retry_after,
            final=True,
        )
    message = R.invalid(detail) if loaded.reason == R.INVALID_SPEC else detail
    return Decision(outcome=Outcome(ConditionType.FAILED, loaded.reason, message))
