"""An elastic job's size changed since its status last recorded it (``kubectl scale``, an
HPA): a Normal Event says so (``ScaledUp: 2 -> 3 nodes``). The children follow from the
new size (the children policy adds the new replicas' pods and deletes the surplus ones,
highest index first); the pods that stay are not touched, so training re-forms its group
without restarting them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import Decision, Event

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft


def decide(draft: Draft) -> Decision | None:
    """The scale Event, when the plugin reports a size change."""
    assert draft.job is not None
    change = draft.plugin.scale(draft.job, draft.raw.get("status"))
    if change is None:
        return None
    reason = R.SCALED_UP if change.after > change.before else R.SCALED_DOWN
    generation = (draft.raw.get("metadata") or {}).get("generation", "")
    event = Event(
        "Normal",
        reason,
        R.scaled(change.before, change.after, change.noun),
        key=f"scale/{generation}/{change.before}/{change.after}",
    )
    return Decision(events=[event])
