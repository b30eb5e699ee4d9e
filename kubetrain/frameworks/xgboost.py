"""XGBoost (a TrainJob of a runtime with ``mlPolicy.xgboost``): the Rabit/collective
tracker runs on node 0 and every worker finds it through the DMLC environment upstream
Trainer v2.3.0 injects into the trainer's ``node`` container:

- ``DMLC_TRACKER_URI`` / ``DMLC_TRACKER_PORT``: node 0's host and port 29500;
- ``DMLC_TASK_ID``: this node's index;
- ``DMLC_NUM_WORKER``: nodes x GPUs per node (one worker per GPU), or nodes on CPU.
"""

from __future__ import annotations

from kubetrain.api.trainer.resolve import RENDEZVOUS_PORT, ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.frameworks.trainjob_nodes import gpus_per_node, index_env, rank_zero


def workers(job: ResolvedTrainJob) -> int:
    """``DMLC_NUM_WORKER``: one per GPU, or one per node without GPUs."""
    return job.spec.num_nodes * max(1, gpus_per_node(job))


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """The DMLC variables of node ``index``."""
    tracker = ReplicaRef(
        job_name=job.name,
        namespace=job.metadata.namespace or "default",
        replica_type=job.spec.trainer_job,
        index=0,
    )
    return [
        env_var("DMLC_TRACKER_URI", rank_zero(job, addressing)),
        env_var("DMLC_TRACKER_PORT", addressing.replica_port(tracker, RENDEZVOUS_PORT)),
        index_env("DMLC_TASK_ID"),
        env_var("DMLC_NUM_WORKER", workers(job)),
    ]
