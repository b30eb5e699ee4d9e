"""XGBoost: every rule of the framework, stated once, for both of its job kinds.

``XGBoostJob`` (kubeflow.org/v1; upstream training-operator v1.9's ``SetPodEnv``):

- Roles: the Master is ``master`` (it runs the Rabit tracker; LightGBM's master too).
- Environment, in every container of every replica: ``MASTER_ADDR``/``MASTER_PORT`` (the
  ``<job>-master-0`` Service and the Master's ``xgboostjob-port``, default 9999),
  ``WORLD_SIZE`` (all replicas), ``RANK`` (Master 0, Worker ``i + 1``),
  ``PYTHONUNBUFFERED=1``; with more than one replica, LightGBM's ``WORKER_PORT`` (the
  Worker's ``xgboostjob-port``) and ``WORKER_ADDRS`` (``<job>-worker-0,...``, one fewer
  than ``WORLD_SIZE``).
- Start order: the Workers start once the Master (the tracker) is Ready.
- Success: the Master succeeded (upstream's rule: the Workers' state does not matter).

A TrainJob of a runtime with ``mlPolicy.xgboost``: the Rabit/collective tracker runs on
node 0 and every worker finds it through the DMLC environment upstream Trainer v2.3.0
injects into the trainer's ``node`` container:

- ``DMLC_TRACKER_URI`` / ``DMLC_TRACKER_PORT``: node 0's host and port 29500;
- ``DMLC_TASK_ID``: this node's index;
- ``DMLC_NUM_WORKER``: nodes x GPUs per node (one worker per GPU), or nodes on CPU.
"""

from __future__ import annotations

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.api.xgboost import INFO as XGBOOST
from kubetrain.api.xgboost import XGBoostJob, XGBoostReplicaType
from kubetrain.frameworks.addressing import (
    Addressing,
    EnvVar,
    ReplicaRef,
    env_var,
    replica_name,
)
from kubetrain.frameworks.base import Done, StartAfter, WholeEnvFramework, after_leader, typed_as
from kubetrain.frameworks.policy import RENDEZVOUS_PORT, TrainJobPolicy
from kubetrain.frameworks.replicas import declared_port, replicas_of
from kubetrain.frameworks.trainjob_nodes import gpus_per_node, index_env, rank_zero, rank_zero_port

CONTAINER = str(XGBOOST.main_container)
PORT_NAME = str(XGBOOST.port_name)
DEFAULT_PORT = int(XGBOOST.default_port or 0)
MASTER = XGBoostReplicaType.MASTER.value
WORKER = XGBoostReplicaType.WORKER.value


def _typed(job: JobBase) -> XGBoostJob:
    return typed_as(job, XGBoostJob, "XGBoost")


def replica_port(job: XGBoostJob, replica_type: str) -> int:
    """The ``xgboostjob-port`` a replica type's ``xgboost`` container declares (9999)."""
    spec = job.spec.xgb_replica_specs.get(XGBoostReplicaType(replica_type))
    if spec is None:
        return DEFAULT_PORT
    return declared_port(spec.template, CONTAINER, PORT_NAME, DEFAULT_PORT)


def world_size(job: XGBoostJob) -> int:
    """``WORLD_SIZE``: every replica of every type."""
    return sum(replicas_of(spec) for spec in job.spec.xgb_replica_specs.values())


def rank(job: XGBoostJob, replica_type: str, index: int) -> int:
    """``RANK``: the Master 0, Worker ``i`` after the Master's replicas (``i + 1``)."""
    if replica_type == WORKER:
        return index + replicas_of(job.spec.xgb_replica_specs.get(XGBoostReplicaType.MASTER))
    return index


def replica_env(
    job: XGBoostJob, replica_type: str, index: int, addressing: Addressing
) -> list[EnvVar]:
    """The variables of every container of replica ``replica_type``-``index``, in
    upstream's order."""
    known = {rtype.value for rtype in job.spec.xgb_replica_specs}
    if replica_type not in known:
        raise ValueError(
            f"replica type {replica_type!r} is not in XGBoostJob {job.name!r}: "
            f"expected one of {sorted(known)}"
        )
    namespace = job.metadata.namespace or "default"

    def ref(rtype: str, i: int) -> ReplicaRef:
        return ReplicaRef(job_name=job.name, namespace=namespace, replica_type=rtype, index=i)

    master = ref(MASTER, 0)
    total = world_size(job)
    env = [
        env_var(E.MASTER_PORT, addressing.replica_port(master, replica_port(job, MASTER))),
        env_var(E.MASTER_ADDR, addressing.replica_host(master, qualified=False)),
        env_var(E.WORLD_SIZE, total),
        env_var(E.RANK, rank(job, replica_type, index)),
        env_var(E.PYTHONUNBUFFERED, "1"),
    ]
    if total > 1:
        # LightGBM's machine list: upstream names total - 1 Workers (the Master is one).
        workers = [ref(WORKER, i) for i in range(total - 1)]
        worker_port = addressing.replica_port(workers[0], replica_port(job, WORKER))
        hosts = ",".join(addressing.replica_host(w, qualified=False) for w in workers)
        env += [env_var(E.WORKER_PORT, worker_port), env_var(E.WORKER_ADDRS, hosts)]
    return env


class XGBoost(WholeEnvFramework[XGBoostJob]):
    """The XGBoost framework of ``XGBoostJob`` (see the module docs)."""

    info: KindInfo = XGBOOST
    model = XGBoostJob
    name = "XGBoost"
    replica_env = staticmethod(replica_env)

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        return "master" if replica_type == MASTER else None

    def start_order(self, job: JobBase) -> list[StartAfter]:
        return after_leader(job, (MASTER,), (WORKER,))

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        if not replicas_of(_typed(job).replica_specs().get(MASTER)):
            return None
        return f"{replica_name(job.name, MASTER, 0)} completed" if done(MASTER, 0) else None


FRAMEWORK = XGBoost()


# -- TrainJob (Kubeflow Trainer v2's xgboost policy) ----------------------------------------


def workers(job: ResolvedTrainJob) -> int:
    """``DMLC_NUM_WORKER``: one per GPU, or one per node without GPUs."""
    return job.spec.num_nodes * max(1, gpus_per_node(job))


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """The DMLC variables of node ``index``."""
    return [
        env_var(E.DMLC_TRACKER_URI, rank_zero(job, addressing)),
        env_var(E.DMLC_TRACKER_PORT, rank_zero_port(job, addressing, RENDEZVOUS_PORT)),
        index_env(E.DMLC_TASK_ID),
        env_var(E.DMLC_NUM_WORKER, workers(job)),
    ]


POLICY = TrainJobPolicy(
    name="xgboost",
    env=trainjob_env,
    rank_port=RENDEZVOUS_PORT,
    reserved_env=(E.DMLC_TRACKER_URI, E.DMLC_TRACKER_PORT, E.DMLC_TASK_ID, E.DMLC_NUM_WORKER),
)
