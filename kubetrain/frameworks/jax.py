"""JAX: every rule of the framework, stated once, for both of its job shapes.

``JAXJob`` (kubeflow.org/v1, upstream training-operator v1.9.0):

- Roles: Worker 0 is ``master`` (upstream's ``IsMasterRole``: index 0).
- Environment (``pkg/controller.v1/jax/envvar.go``), in every container of every Worker,
  in this order: ``PYTHONUNBUFFERED=1``; ``COORDINATOR_PORT``, the ``jaxjob-port`` the
  Worker spec's ``jax`` container declares (default 6666); ``COORDINATOR_ADDRESS``, Worker
  0's Service ``<job>-worker-0`` (no port, no namespace); ``NUM_PROCESSES``, the replicas
  of the job; ``PROCESS_ID``, the Worker's index. The program passes them to
  ``jax.distributed.initialize(f"{addr}:{port}", num_processes, process_id)``.
- Start order: none; every Worker starts at once and Worker 0 coordinates.
- Success: every Worker succeeded.

A TrainJob of a runtime with ``mlPolicy.jax`` (Trainer v2.3.0): ``jax.distributed.
initialize()`` reads its process count, its id and the coordinator's address from the
environment upstream injects into the trainer's ``node`` container:

- ``JAX_NUM_PROCESSES``: the TrainJob's nodes;
- ``JAX_PROCESS_ID``: this node's index;
- ``JAX_COORDINATOR_ADDRESS``: node 0's host and port 29500.
"""

from __future__ import annotations

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.jax import INFO as JAX
from kubetrain.api.jax import JAXJob, JAXReplicaType
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.frameworks.base import Done, StartAfter, WholeEnvFramework, typed_as
from kubetrain.frameworks.policy import RENDEZVOUS_PORT, TrainJobPolicy
from kubetrain.frameworks.replicas import declared_port, replicas_of
from kubetrain.frameworks.trainjob_nodes import index_env, rank_zero, rank_zero_port

CONTAINER = str(JAX.main_container)
PORT_NAME = str(JAX.port_name)
DEFAULT_PORT = int(JAX.default_port or 0)
WORKER = JAXReplicaType.WORKER.value

#: The JAXJob's variables (upstream's names).


def _typed(job: JobBase) -> JAXJob:
    return typed_as(job, JAXJob, "JAX")


def num_processes(job: JAXJob) -> int:
    """``NUM_PROCESSES``: every replica of the job is one JAX process."""
    return sum(replicas_of(spec) for spec in job.spec.jax_replica_specs.values())


def coordinator_port(job: JAXJob) -> int:
    """The ``jaxjob-port`` of the Worker spec's ``jax`` container (default 6666)."""
    spec = job.spec.jax_replica_specs.get(JAXReplicaType.WORKER)
    if spec is None:
        return DEFAULT_PORT
    return declared_port(spec.template, CONTAINER, PORT_NAME, DEFAULT_PORT)


def replica_env(job: JAXJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
    """The variables injected into every container of replica ``replica_type``-``index``."""
    known = {rtype.value for rtype in job.spec.jax_replica_specs}
    if replica_type not in known:
        raise ValueError(
            f"replica type {replica_type!r} is not in JAXJob {job.name!r}: "
            f"expected one of {sorted(known)}"
        )
    namespace = job.metadata.namespace or "default"
    coordinator = ReplicaRef(job_name=job.name, namespace=namespace, replica_type=WORKER, index=0)
    return [
        env_var(E.PYTHONUNBUFFERED, "1"),
        env_var(E.COORDINATOR_PORT, addressing.replica_port(coordinator, coordinator_port(job))),
        env_var(E.COORDINATOR_ADDRESS, addressing.replica_host(coordinator, qualified=False)),
        env_var(E.NUM_PROCESSES, num_processes(job)),
        env_var(E.PROCESS_ID, index),
    ]


class Jax(WholeEnvFramework[JAXJob]):
    """The JAX framework of JAXJobs (see the module docs)."""

    info: KindInfo = JAX
    model = JAXJob
    name = "JAX"
    replica_env = staticmethod(replica_env)

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        """``master`` for Worker 0, the coordinator (as upstream labels it)."""
        _typed(job)
        return "master" if replica_type == WORKER and index == 0 else None

    def start_order(self, job: JobBase) -> list[StartAfter]:
        """None: upstream starts every Worker at once (``jax.distributed.initialize``
        waits for the coordinator)."""
        _typed(job)
        return []

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        """Every Worker succeeded (upstream: no Worker left to succeed)."""
        workers = replicas_of(_typed(job).spec.jax_replica_specs.get(JAXReplicaType.WORKER))
        if workers and all(done(WORKER, i) for i in range(workers)):
            return f"all {workers} workers completed"
        return None


FRAMEWORK = Jax()


# -- TrainJob (Kubeflow Trainer v2's jax policy) ---------------------------------------------


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """The JAX variables of node ``index``."""
    port = rank_zero_port(job, addressing, RENDEZVOUS_PORT)
    return [
        env_var(E.JAX_NUM_PROCESSES, job.spec.num_nodes),
        index_env(E.JAX_PROCESS_ID),
        env_var(E.JAX_COORDINATOR_ADDRESS, f"{rank_zero(job, addressing)}:{port}"),
    ]


POLICY = TrainJobPolicy(name="jax", env=trainjob_env, rank_port=RENDEZVOUS_PORT)
