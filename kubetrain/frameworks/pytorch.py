"""PyTorch (``PyTorchJob``): every rule of the framework, stated once.

- Roles: the Master is ``master``; without a Master, Worker 0 is.
- Environment (upstream's contract, training-operator v1.9), in every container:
  ``PYTHONUNBUFFERED=1``; with a Master, ``MASTER_ADDR``/``MASTER_PORT`` point at
  ``<job>-master-0`` and its ``pytorchjob-port``, ``WORLD_SIZE`` counts processes
  (nodes x nprocPerNode, nodes x 1 when nprocPerNode is not a number) and ``RANK`` is the
  node rank (Master 0, Worker ``i + 1``); torchrun's ``PET_*`` variables describe the same
  layout, and an ``elasticPolicy`` adds the rendezvous settings.
- Start order: the Workers start once the Master is Ready.
- Success: the Master succeeded; without one, every Worker (elastic jobs: any Worker).
- Autoscaling (upstream's ``hpa.go``): an ``elasticPolicy`` with ``metrics`` gets a
  HorizontalPodAutoscaler over the Worker replicas, from ``minReplicas`` to
  ``maxReplicas`` (both defaulted at admission), its metrics verbatim.
"""

from __future__ import annotations

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import PYTORCH
from kubetrain.api.pytorch import PyTorchJob, PyTorchReplicaType, default_nproc_per_node
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.api.trainer.runtime import TorchElasticPolicy
from kubetrain.frameworks import trainjob_nodes
from kubetrain.frameworks.addressing import (
    Addressing,
    EnvVar,
    ReplicaRef,
    env_var,
    replica_name,
)
from kubetrain.frameworks.base import Done, StartAfter, WholeEnvFramework, after_leader, typed_as
from kubetrain.frameworks.elastic import Autoscaling
from kubetrain.frameworks.policy import RENDEZVOUS_PORT, TrainJobPolicy, trainer_node
from kubetrain.frameworks.replicas import declared_port, replicas_of

CONTAINER = str(PYTORCH.main_container)
#: The rendezvous backend of an elastic launch without a store of its own.
C10D = "c10d"
PORT_NAME = str(PYTORCH.port_name)
DEFAULT_PORT = int(PYTORCH.default_port or 0)
MASTER = PyTorchReplicaType.MASTER.value
WORKER = PyTorchReplicaType.WORKER.value


def _typed(job: JobBase) -> PyTorchJob:
    return typed_as(job, PyTorchJob, "PyTorch")


def nproc_per_node(job: PyTorchJob) -> str:
    """``nprocPerNode``: the spec's, else the deprecated elastic one, else the default. The
    one answer: the pods' ``PET_NPROC_PER_NODE`` and ``WORLD_SIZE`` and ``kubetrain
    validate``'s summary all read it here."""
    if job.spec.nproc_per_node is not None:
        return job.spec.nproc_per_node
    elastic = job.spec.elastic_policy
    if elastic is not None and elastic.n_proc_per_node is not None:
        return str(elastic.n_proc_per_node)
    return default_nproc_per_node(job.spec.to_wire()) or "auto"


def world_size_of(nodes: int, processes_per_node: int) -> int:
    """``WORLD_SIZE``: processes, not pods (nodes x processes per node)."""
    return nodes * processes_per_node


def world_size(job: PyTorchJob) -> int:
    """Processes in the job: nodes x nprocPerNode (x 1 when it is auto, cpu or gpu)."""
    nodes = sum(replicas_of(spec) for spec in job.spec.pytorch_replica_specs.values())
    return world_size_of(nodes, processes_per_node(job))


def processes_per_node(job: PyTorchJob) -> int:
    """Processes per pod: nprocPerNode when it is a number, else 1."""
    nproc = nproc_per_node(job)
    return int(nproc) if nproc.isdigit() else 1


def node_rank(replica_type: str, index: int, has_master: bool) -> int:
    """The node rank: Master 0, Worker ``i + 1`` (Worker ``i`` without a Master)."""
    if replica_type == MASTER:
        return 0
    return index + 1 if has_master else index


def job_uid(job: JobBase) -> str:
    """The job's UID (the API server sets it), else its name (a manifest run locally)."""
    uid = (job.metadata.model_extra or {}).get("uid")
    return str(uid) if uid else job.name


def replica_port(job: PyTorchJob, replica_type: str) -> int:
    """The ``pytorchjob-port`` a replica type's container declares (default 23456)."""
    spec = job.spec.pytorch_replica_specs.get(PyTorchReplicaType(replica_type))
    if spec is None:
        return DEFAULT_PORT
    return declared_port(spec.template, CONTAINER, PORT_NAME, DEFAULT_PORT)


def elastic_bounds(job: PyTorchJob) -> tuple[int, int] | None:
    """``(min, max)`` nodes of an elastic job (``elasticPolicy`` min/max replicas, each
    the other when one is unset, else the Worker replicas); None when it is not elastic."""
    elastic = job.spec.elastic_policy
    if elastic is None:
        return None
    workers = replicas_of(job.spec.pytorch_replica_specs.get(PyTorchReplicaType.WORKER))
    low = elastic.min_replicas or elastic.max_replicas or workers
    return low, elastic.max_replicas or low


def replica_env(
    job: PyTorchJob, replica_type: str, index: int, addressing: Addressing
) -> list[EnvVar]:
    """The variables injected into every container of replica ``replica_type``-``index``."""
    specs = job.spec.pytorch_replica_specs
    known = {rtype.value for rtype in specs}
    if replica_type not in known:
        raise ValueError(
            f"replica type {replica_type!r} is not in PyTorchJob {job.name!r}: "
            f"expected one of {sorted(known)}"
        )
    has_master = PyTorchReplicaType.MASTER in specs
    namespace = job.metadata.namespace or "default"
    nodes = sum(replicas_of(spec) for spec in specs.values())
    rank = node_rank(replica_type, index, has_master)
    env = [env_var(E.PYTHONUNBUFFERED, "1")]

    if has_master:
        master = ReplicaRef(job_name=job.name, namespace=namespace, replica_type=MASTER, index=0)
        master_addr = addressing.replica_host(master, qualified=False)
        master_port = addressing.replica_port(master, replica_port(job, MASTER))
        env += [
            env_var(E.MASTER_ADDR, master_addr),
            env_var(E.MASTER_PORT, master_port),
            env_var(E.WORLD_SIZE, world_size(job)),
            env_var(E.RANK, rank),
            env_var(E.PET_MASTER_ADDR, master_addr),
            env_var(E.PET_MASTER_PORT, master_port),
            env_var(E.PET_NODE_RANK, rank),
        ]
    env.append(env_var(E.PET_NPROC_PER_NODE, nproc_per_node(job)))

    elastic = job.spec.elastic_policy
    if elastic is None:
        env.append(env_var(E.PET_NNODES, nodes))
        return env

    low, high = elastic_bounds(job) or (nodes, nodes)
    worker0 = ReplicaRef(job_name=job.name, namespace=namespace, replica_type=WORKER, index=0)
    rdzv_host = elastic.rdzv_host or addressing.replica_host(worker0, qualified=False)
    rdzv_port = elastic.rdzv_port or addressing.replica_port(worker0, replica_port(job, WORKER))
    env += [
        env_var(E.PET_NNODES, f"{low}:{high}"),
        env_var(E.PET_RDZV_ENDPOINT, f"{rdzv_host}:{rdzv_port}"),
        env_var(E.PET_RDZV_BACKEND, (elastic.rdzv_backend or C10D)),
        env_var(E.PET_RDZV_ID, elastic.rdzv_id or job_uid(job)),
    ]
    if elastic.rdzv_conf:
        env.append(
            env_var(E.PET_RDZV_CONF, ",".join(f"{c.key}={c.value}" for c in elastic.rdzv_conf))
        )
    if elastic.max_restarts is not None:
        env.append(env_var(E.PET_MAX_RESTARTS, elastic.max_restarts))
    if elastic.standalone:
        # torchrun reads boolean PET_* flags as integers.
        env.append(env_var(E.PET_STANDALONE, 1))
    return env


def autoscaling(job: JobBase) -> Autoscaling | None:
    """The HPA an elastic job with ``metrics`` owns (None: no metrics, no HPA)."""
    elastic = _typed(job).spec.elastic_policy
    bounds = elastic_bounds(_typed(job))
    if elastic is None or not elastic.metrics or bounds is None:
        return None
    low, high = bounds
    return Autoscaling(
        replica_type=WORKER,
        unit="workers",
        min_replicas=low,
        max_replicas=high,
        metrics=tuple(elastic.metrics),
    )


class PyTorch(WholeEnvFramework[PyTorchJob]):
    """The PyTorch framework (see the module docs)."""

    info: KindInfo = PYTORCH
    model = PyTorchJob
    name = "PyTorch"
    replica_env = staticmethod(replica_env)
    autoscaling = staticmethod(autoscaling)

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        """``master`` for the Master, or for Worker 0 when there is no Master (as upstream
        labels it: the SDK's ``get_job_logs`` and ``is_master`` look for that label)."""
        if replica_type == MASTER:
            return "master"
        has_master = bool(replicas_of(_typed(job).replica_specs().get(MASTER)))
        return "master" if not has_master and replica_type == WORKER and index == 0 else None

    def start_order(self, job: JobBase) -> list[StartAfter]:
        return after_leader(job, (MASTER,), (WORKER,))

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        typed = _typed(job)
        specs = typed.replica_specs()
        if replicas_of(specs.get(MASTER)):
            return f"{replica_name(job.name, MASTER, 0)} completed" if done(MASTER, 0) else None
        workers = replicas_of(specs.get(WORKER))
        finished = [i for i in range(workers) if done(WORKER, i)]
        if workers and len(finished) == workers:
            return f"all {workers} workers completed"
        if typed.spec.elastic_policy is not None and finished:
            return f"{replica_name(job.name, WORKER, finished[0])} completed (elastic)"
        return None


FRAMEWORK = PyTorch()


# -- TrainJob (Kubeflow Trainer v2's torch policy) ------------------------------------------


def trainjob_nproc_per_node(job: ResolvedTrainJob) -> str:
    """``PET_NPROC_PER_NODE`` of a torch TrainJob: ``spec.trainer.numProcPerNode``, else
    ``auto`` on GPU nodes, else the node's whole CPUs (torchrun's ``auto`` would take
    every CPU of the host, not the pod's share)."""
    if job.spec.num_proc_per_node is not None:
        return str(job.spec.num_proc_per_node)
    if trainjob_nodes.gpus_per_node(job) > 0:
        return "auto"
    return str(trainjob_nodes.cpus_per_node(job))


def trainjob_elastic(job: ResolvedTrainJob) -> TorchElasticPolicy | None:
    """The ``elasticPolicy`` of a torch TrainJob's runtime (None: a fixed node count)."""
    return job.spec.torch.elastic_policy if job.spec.torch is not None else None


def trainjob_autoscaling(job: ResolvedTrainJob) -> Autoscaling | None:
    """The HPA of an elastic torch TrainJob whose runtime's ``elasticPolicy`` names
    ``metrics``: its trainer job's nodes, from ``minNodes`` to ``maxNodes``."""
    elastic = trainjob_elastic(job)
    if elastic is None or not elastic.metrics:
        return None
    return Autoscaling(
        replica_type=job.spec.trainer_job,
        unit="nodes",
        min_replicas=elastic.min_nodes,
        max_replicas=elastic.max_nodes,
        metrics=tuple(elastic.metrics),
    )


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """torchrun's variables for node ``index`` of a torch TrainJob (upstream v2.3.0's), and
    for an elastic one (the runtime's ``elasticPolicy``) the elastic launch's: nodes
    ``min:max`` and a c10d rendezvous at node 0, identified by the TrainJob's UID. None of
    them depends on the node count, so a scale leaves the running pods as they are."""
    host = trainjob_nodes.rank_zero(job, addressing)
    port = trainjob_nodes.rank_zero_port(job, addressing, RENDEZVOUS_PORT)
    elastic = trainjob_elastic(job)
    nodes = job.spec.num_nodes if elastic is None else f"{elastic.min_nodes}:{elastic.max_nodes}"
    env = [
        env_var(E.PET_NNODES, nodes),
        env_var(E.PET_NPROC_PER_NODE, trainjob_nproc_per_node(job)),
        trainjob_nodes.index_env(E.PET_NODE_RANK),
        env_var(E.PET_MASTER_ADDR, host),
        env_var(E.PET_MASTER_PORT, port),
    ]
    if elastic is None:
        return env
    env += [
        env_var(E.PET_RDZV_ENDPOINT, f"{host}:{port}"),
        env_var(E.PET_RDZV_BACKEND, C10D),
        env_var(E.PET_RDZV_ID, job_uid(job)),
    ]
    if elastic.max_restarts is not None:
        env.append(env_var(E.PET_MAX_RESTARTS, elastic.max_restarts))
    return env


def trainjob_elastic_bounds(job: ResolvedTrainJob) -> tuple[int, int] | None:
    """``(minNodes, maxNodes)`` of an elastic torch TrainJob (its runtime's torch
    ``elasticPolicy``), None when it is not elastic: what ``kubetrain run --local``
    (:mod:`kubetrain.local.elastic`) scales its nodes within."""
    elastic = trainjob_elastic(job)
    return None if elastic is None else (elastic.min_nodes, elastic.max_nodes)


def is_injection_target(job: ResolvedTrainJob, replicated_job: str, container: str) -> bool:
    """Whether the runtime's ``torch.envInjection`` names this container."""
    policy = job.spec.torch
    injection = policy.env_injection if policy is not None else None
    return any(
        target.job_name == replicated_job and container in (target.container_names or [])
        for target in (injection.targets if injection is not None else None) or []
    )


def _trainjob_targets(job: ResolvedTrainJob, replicated_job: str, container: str) -> bool:
    """The trainer's ``node`` container and the ``envInjection`` targets."""
    return trainer_node(job, replicated_job, container) or is_injection_target(
        job, replicated_job, container
    )


POLICY = TrainJobPolicy(
    name="torch",
    env=trainjob_env,
    targets=_trainjob_targets,
    rank_port=RENDEZVOUS_PORT,
    reserved_env=(
        E.PET_NNODES,
        E.PET_NPROC_PER_NODE,
        E.PET_NODE_RANK,
        E.PET_MASTER_ADDR,
        E.PET_MASTER_PORT,
    ),
)
