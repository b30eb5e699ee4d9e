"""JAX (a TrainJob of a runtime with ``mlPolicy.jax``): ``jax.distributed.initialize()``
reads its process count, its id and the coordinator's address from the environment that
upstream Trainer v2.3.0 injects into the trainer's ``node`` container:

- ``JAX_NUM_PROCESSES``: the TrainJob's nodes;
- ``JAX_PROCESS_ID``: this node's index;
- ``JAX_COORDINATOR_ADDRESS``: node 0's host and port 29500.
"""

from __future__ import annotations

from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, env_var
from kubetrain.frameworks.policy import RENDEZVOUS_PORT, TrainJobPolicy
from kubetrain.frameworks.trainjob_nodes import index_env, rank_zero, rank_zero_port

#: ``jax.distributed.initialize()``'s variables (upstream reserves none of them).
JAX_NUM_PROCESSES = "JAX_NUM_PROCESSES"
JAX_PROCESS_ID = "JAX_PROCESS_ID"
JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """The JAX variables of node ``index``."""
    port = rank_zero_port(job, addressing, RENDEZVOUS_PORT)
    return [
        env_var(JAX_NUM_PROCESSES, job.spec.num_nodes),
        index_env(JAX_PROCESS_ID),
        env_var(JAX_COORDINATOR_ADDRESS, f"{rank_zero(job, addressing)}:{port}"),
    ]


POLICY = TrainJobPolicy(name="jax", env=trainjob_env, rank_port=RENDEZVOUS_PORT)
