"""An invalid job (the typed API or its plugin refuses it) fails at once with
``InvalidSpec`` and every problem in the message; it is never run, and a job that had
already ended is left as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.api.common import ConditionType
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import Decision
from kubetrain.controller.plugins.base import Outcome

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
    return Decision(outcome=Outcome(ConditionType.FAILED, R.INVALID_SPEC, R.invalid(detail)))
