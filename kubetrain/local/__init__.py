"""Local mode: a job manifest (``kubetrain run --local``) or a training function
(:func:`train`) run on this machine as real processes, with the same framework rules the
operator applies."""

from kubetrain.local.execute import Outcome, execute
from kubetrain.local.function import LocalTrainError, RankResult, TrainResult, train
from kubetrain.local.plan import LocalPlan, LocalReplica, LocalRunError, plan_local_run
from kubetrain.local.trainjob import plan_trainjob

__all__ = [
    "LocalPlan",
    "LocalReplica",
    "LocalRunError",
    "LocalTrainError",
    "Outcome",
    "RankResult",
    "TrainResult",
    "execute",
    "plan_local_run",
    "plan_trainjob",
    "train",
]
