"""The consequences of a job's end, whichever policy ended it (a failure, a success, a
deadline, a startup timeout, a child the API server refused): the Created condition
if the job never had it, the final condition and its Event, ``completionTime``, the
replica counts as they stand, the cleanup (``cleanup.at_end``) and when to look again
(the TTL, or the end of the ranks' grace period).

The draft asks this policy as soon as a decision carries an outcome; its requeue
replaces any earlier one, since a finished job is looked at again only for its
cleanup and its TTL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.controller import conditions as C
from kubetrain.controller.decisions import ConditionChange, Decision, soonest
from kubetrain.controller.model import Outcome
from kubetrain.controller.policies import cleanup, deadlines, goodput

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft


def decide(draft: Draft, outcome: Outcome) -> Decision:
    """End the job with ``outcome`` (see the module docs)."""
    decision = draft.created() or Decision()
    failed = outcome.condition is ConditionType.FAILED
    decision.conditions.append(
        ConditionChange(
            outcome.condition,
            ConditionStatus.TRUE,
            outcome.reason,
            outcome.message,
            event="Warning" if failed else "Normal",
        )
    )
    statuses = draft.status.replica_statuses if draft.job is None else draft.replica_statuses
    # A finished job recreates nothing: no failure waits to be counted any more.
    statuses = {
        rtype: st.model_copy(update={"counted_failures": None})
        for rtype, st in (statuses or {}).items()
    } or None
    culprit = outcome.replica_type if failed else None
    if statuses and culprit in statuses and draft.plugin.counts_failed_replica:
        counted = statuses[culprit]
        statuses[culprit] = counted.model_copy(update={"failed": max(counted.failed or 0, 1)})
    # Counted as they are: ranks still running are active, not succeeded.
    completion_time = outcome.at or C.format_time(draft.ctx.now)
    decision.status.update({"completion_time": completion_time, "replica_statuses": statuses})
    final_goodput = goodput.ended(draft.status, draft.ctx.now)
    if final_goodput is not None:
        decision.status["goodput"] = final_goodput
    ended = draft.status.model_copy(update=decision.status)
    decision.delete, grace_after = cleanup.at_end(draft, not failed, ended.completion_time)
    ttl = deadlines.ttl_after_finished(draft.run_policy, ended, draft.ctx.now)
    decision.requeue_after = soonest(deadlines.SLACK_SECONDS if ttl.due else ttl.after, grace_after)
    return decision
