"""PyTorchJob plugin: the environment every replica's containers get.

The contract is upstream's (training-operator v1.9): ``PYTHONUNBUFFERED=1`` always;
with a Master, ``MASTER_ADDR``/``MASTER_PORT`` point at ``<job>-master-0`` and its
``pytorchjob-port``, ``WORLD_SIZE`` counts processes (nodes x nprocPerNode, nodes x 1
when nprocPerNode is not a number) and ``RANK`` is the node rank (Master 0, Worker
``i + 1``); torchrun's ``PET_*`` variables describe the same layout, and an
``elasticPolicy`` adds the rendezvous settings.
"""

from __future__ import annotations

from kubetrain.api.pytorch import (
    DEFAULT_CONTAINER,
    DEFAULT_PORT,
    PORT_NAME,
    PyTorchJob,
    PyTorchReplicaType,
)
from kubetrain.controller.plugins.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.controller.plugins.common import declared_port, replicas_of

#: The container the operator adds the port to (every container gets the variables).
CONTAINER = DEFAULT_CONTAINER
MASTER = PyTorchReplicaType.MASTER.value
WORKER = PyTorchReplicaType.WORKER.value


def nproc_per_node(job: PyTorchJob) -> str:
    """``nprocPerNode`` after defaulting: the spec's, the deprecated elastic one, or auto."""
    if job.spec.nproc_per_node is not None:
        return job.spec.nproc_per_node
    elastic = job.spec.elastic_policy
    if elastic is not None and elastic.n_proc_per_node is not None:
        return str(elastic.n_proc_per_node)
    return "auto"


def world_size(job: PyTorchJob) -> int:
    """Processes in the job: nodes x nprocPerNode (x 1 when it is auto, cpu or gpu)."""
    nodes = sum(replicas_of(spec) for spec in job.spec.pytorch_replica_specs.values())
    nproc = nproc_per_node(job)
    return nodes * (int(nproc) if nproc.isdigit() else 1)


def node_rank(replica_type: str, index: int, has_master: bool) -> int:
    """The node rank: Master 0, Worker ``i + 1`` (Worker ``i`` without a Master)."""
    if replica_type == MASTER:
        return 0
    return index + 1 if has_master else index


def job_uid(job: PyTorchJob) -> str:
    """The job's UID (the API server sets it), else its name (a manifest run locally)."""
    uid = (job.metadata.model_extra or {}).get("uid")
    return str(uid) if uid else job.name


def replica_port(job: PyTorchJob, replica_type: str) -> int:
    """The ``pytorchjob-port`` a replica type's container declares (default 23456)."""
    spec = job.spec.pytorch_replica_specs.get(PyTorchReplicaType(replica_type))
    if spec is None:
        return DEFAULT_PORT
    return declared_port(spec.template, DEFAULT_CONTAINER, PORT_NAME, DEFAULT_PORT)


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
    env = [env_var("PYTHONUNBUFFERED", "1")]

    if has_master:
        master = ReplicaRef(job_name=job.name, namespace=namespace, replica_type=MASTER, index=0)
        master_addr = addressing.replica_host(master, qualified=False)
        master_port = addressing.replica_port(master, replica_port(job, MASTER))
        env += [
            env_var("MASTER_ADDR", master_addr),
            env_var("MASTER_PORT", master_port),
            env_var("WORLD_SIZE", world_size(job)),
            env_var("RANK", rank),
            env_var("PET_MASTER_ADDR", master_addr),
            env_var("PET_MASTER_PORT", master_port),
            env_var("PET_NODE_RANK", rank),
        ]
    env.append(env_var("PET_NPROC_PER_NODE", nproc_per_node(job)))

    elastic = job.spec.elastic_policy
    if elastic is None:
        env.append(env_var("PET_NNODES", nodes))
        return env

    workers = replicas_of(specs.get(PyTorchReplicaType.WORKER))
    low = elastic.min_replicas or elastic.max_replicas or workers
    high = elastic.max_replicas or low
    worker0 = ReplicaRef(job_name=job.name, namespace=namespace, replica_type=WORKER, index=0)
    rdzv_host = elastic.rdzv_host or addressing.replica_host(worker0, qualified=False)
    rdzv_port = elastic.rdzv_port or addressing.replica_port(worker0, replica_port(job, WORKER))
    env += [
        env_var("PET_NNODES", f"{low}:{high}"),
        env_var("PET_RDZV_ENDPOINT", f"{rdzv_host}:{rdzv_port}"),
        env_var("PET_RDZV_BACKEND", (elastic.rdzv_backend or "c10d")),
        env_var("PET_RDZV_ID", elastic.rdzv_id or job_uid(job)),
    ]
    if elastic.rdzv_conf:
        env.append(
            env_var("PET_RDZV_CONF", ",".join(f"{c.key}={c.value}" for c in elastic.rdzv_conf))
        )
    if elastic.max_restarts is not None:
        env.append(env_var("PET_MAX_RESTARTS", elastic.max_restarts))
    if elastic.standalone:
        # torchrun reads boolean PET_* flags as integers.
        env.append(env_var("PET_STANDALONE", 1))
    return env
