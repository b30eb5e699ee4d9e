"""XGBoost (a TrainJob of a runtime with ``mlPolicy.xgboost``): the Rabit/collective
tracker runs on node 0 and every worker finds it through the DMLC environment upstream
Trainer v2.3.0 injects into the trainer's ``node`` container:

- ``DMLC_TRACKER_URI`` / ``DMLC_TRACKER_PORT``: node 0's host and port 29500;
- ``DMLC_TASK_ID``: this node's index;
- ``DMLC_NUM_WORKER``: nodes x GPUs per node (one worker per GPU), or nodes on CPU.
"""

from __future__ import annotations

from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, env_var
from kubetrain.frameworks.policy import RENDEZVOUS_PORT, TrainJobPolicy
from kubetrain.frameworks.trainjob_nodes import gpus_per_node, index_env, rank_zero, rank_zero_port


def workers(job: ResolvedTrainJob) -> int:
    """``DMLC_NUM_WORKER``: one per GPU, or one per node without GPUs."""
    return job.spec.num_nodes * max(1, gpus_per_node(job))


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """The DMLC variables of node ``index``."""
    return [
        env_var(T.DMLC_TRACKER_URI, rank_zero(job, addressing)),
        env_var(T.DMLC_TRACKER_PORT, rank_zero_port(job, addressing, RENDEZVOUS_PORT)),
        index_env(T.DMLC_TASK_ID),
        env_var(T.DMLC_NUM_WORKER, workers(job)),
    ]


POLICY = TrainJobPolicy(
    name="xgboost",
    env=trainjob_env,
    rank_port=RENDEZVOUS_PORT,
    reserved_env=(T.DMLC_TRACKER_URI, T.DMLC_TRACKER_PORT, T.DMLC_TASK_ID, T.DMLC_NUM_WORKER),
)
