"""Local mode: a job manifest run on this machine as real processes, with the same
framework rules the operator applies (``kubetrain run --local``)."""

from kubetrain.local.execute import Outcome, execute
from kubetrain.local.plan import LocalPlan, LocalReplica, LocalRunError, plan_local_run

__all__ = ["LocalPlan", "LocalReplica", "LocalRunError", "Outcome", "execute", "plan_local_run"]
