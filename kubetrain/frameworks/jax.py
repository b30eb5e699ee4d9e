"""JAX (a TrainJob of a runtime with ``mlPolicy.jax``): ``jax.distributed.initialize()``
reads its process count, its id and the coordinator's address from the environment that
upstream Trainer v2.3.0 injects into the trainer's ``node`` container:

- ``JAX_NUM_PROCESSES``: the TrainJob's nodes;
- ``JAX_PROCESS_ID``: this node's index;
- ``JAX_COORDINATOR_ADDRESS``: node 0's host and port 29500.
"""

from __future__ import annotations

from kubetrain.api.trainer.resolve import RENDEZVOUS_PORT, ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.frameworks.trainjob_nodes import index_env, rank_zero


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """The JAX variables of node ``index``."""
    coordinator = ReplicaRef(
        job_name=job.name,
        namespace=job.metadata.namespace or "default",
        replica_type=job.spec.trainer_job,
        index=0,
    )
    port = addressing.replica_port(coordinator, RENDEZVOUS_PORT)
    return [
        env_var("JAX_NUM_PROCESSES", job.spec.num_nodes),
        index_env("JAX_PROCESS_ID"),
        env_var("JAX_COORDINATOR_ADDRESS", f"{rank_zero(job, addressing)}:{port}"),
    ]
