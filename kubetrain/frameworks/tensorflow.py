"""TensorFlow (``TFJob``): every rule of the framework, stated once.

- Roles: the Chief (or Master) is ``master``; without one, Worker 0 is.
- Environment: ``TF_CONFIG`` (upstream, training-operator v1.9) in the ``tensorflow``
  container (else the first), only when the job has more than one replica in total. Hosts
  are the per-replica Services ``<job>-<type>-<i>.<ns>.svc`` on each type's ``tfjob-port``
  (default 2222); cluster keys are the lowercased replica types. With
  ``enableDynamicWorker`` the sparse form lists every PS but only this worker.
- Start order: Workers and Evaluators start once the Chief/Master is Ready.
- Success: the Chief/Master succeeded; without one, Worker 0 (every Worker with
  ``successPolicy: AllWorkers``). With ``enableDynamicWorker`` a failed Worker is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import TENSORFLOW
from kubetrain.api.tensorflow import SuccessPolicy, TFJob, TFReplicaType
from kubetrain.api.trainer.resolve import TENSORFLOW as TENSORFLOW_LABEL
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.addressing import (
    Addressing,
    EnvVar,
    ReplicaRef,
    env_var,
    replica_name,
)
from kubetrain.frameworks.base import Done, StartAfter, after_leader, leader_first, typed_as
from kubetrain.frameworks.policy import TrainJobPolicy
from kubetrain.frameworks.replicas import declared_port, main_container, replicas_of

#: The container ``TF_CONFIG`` goes into (else the first container).
CONTAINER = str(TENSORFLOW.main_container)
PORT_NAME = str(TENSORFLOW.port_name)
DEFAULT_PORT = int(TENSORFLOW.default_port or 0)
CHIEF = TFReplicaType.CHIEF.value
MASTER = TFReplicaType.MASTER.value
PS = TFReplicaType.PS.value
WORKER = TFReplicaType.WORKER.value
EVALUATOR = TFReplicaType.EVALUATOR.value
LEADERS = (CHIEF, MASTER)


def _typed(job: JobBase) -> TFJob:
    return typed_as(job, TFJob, "TensorFlow")


def cluster_spec(job: TFJob, addressing: Addressing) -> dict[str, list[str]]:
    """``{"worker": ["host:port", ...], "ps": [...], ...}`` for the whole job."""
    namespace = job.metadata.namespace or "default"
    cluster: dict[str, list[str]] = {}
    for rtype, spec in job.spec.tf_replica_specs.items():
        declared = declared_port(spec.template, CONTAINER, PORT_NAME, DEFAULT_PORT)
        addresses = []
        for index in range(replicas_of(spec)):
            replica = ReplicaRef(
                job_name=job.name, namespace=namespace, replica_type=rtype.value, index=index
            )
            host = addressing.replica_host(replica, qualified=True)
            addresses.append(f"{host}:{addressing.replica_port(replica, declared)}")
        cluster[rtype.value.lower()] = addresses
    return cluster


def tf_config(
    job: TFJob, replica_type: str, index: int, addressing: Addressing
) -> dict[str, Any] | None:
    """The ``TF_CONFIG`` document for one replica, or None for a single-replica job."""
    known = {rtype.value for rtype in job.spec.tf_replica_specs}
    if replica_type not in known:
        raise ValueError(
            f"replica type {replica_type!r} is not in TFJob {job.name!r}: "
            f"expected one of {sorted(known)}"
        )
    if sum(replicas_of(spec) for spec in job.spec.tf_replica_specs.values()) == 1:
        return None
    task_type = replica_type.lower()
    full = cluster_spec(job, addressing)
    cluster: dict[str, Any] = full
    if job.spec.enable_dynamic_worker:
        cluster = {"ps": full.get("ps", [])}
        if task_type == "worker":
            cluster["worker"] = {str(index): full["worker"][index]}
    return {
        "cluster": cluster,
        "task": {"type": task_type, "index": index},
        "environment": "cloud",
    }


def replica_env(job: TFJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
    """The variables injected into the ``tensorflow`` container of one replica."""
    config = tf_config(job, replica_type, index, addressing)
    if config is None:
        return []
    return [env_var(E.TF_CONFIG, json.dumps(config, separators=(",", ":")))]


# -- TrainJob (a runtime labelled trainer.kubeflow.org/framework: tensorflow) ---------------


def trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    """``TF_CONFIG`` for node ``index`` of a TrainJob whose runtime is TensorFlow's (a
    kubetrain extension: upstream Trainer has no TensorFlow policy, so kubetrain reads the
    runtime's framework label). Every node is a ``worker`` on port 2222 of its host
    (MultiWorkerMirroredStrategy); one node gets none, as a single-replica TFJob."""
    nodes = job.spec.num_nodes
    if nodes <= 1:
        return []
    namespace = job.metadata.namespace or "default"
    workers = []
    for i in range(nodes):
        replica = ReplicaRef(
            job_name=job.name, namespace=namespace, replica_type=job.spec.trainer_job, index=i
        )
        host = addressing.trainjob_host(job.name, job.spec.trainer_job, i)
        workers.append(f"{host}:{addressing.replica_port(replica, DEFAULT_PORT)}")
    config = {
        "cluster": {"worker": workers},
        "task": {"type": "worker", "index": index},
        "environment": "cloud",
    }
    return [env_var(E.TF_CONFIG, json.dumps(config, separators=(",", ":")))]


#: kubetrain's TensorFlow policy: ``TF_CONFIG`` in the trainer's ``node`` container, each
#: node serving port 2222.
POLICY = TrainJobPolicy(
    name=TENSORFLOW_LABEL, env=trainjob_env, rank_port=DEFAULT_PORT, ml_policy_source=False
)


class TensorFlow:
    """The TensorFlow framework (see the module docs)."""

    info: KindInfo = TENSORFLOW

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        if replica_type in LEADERS:
            return "master"
        has_leader = any(t in _typed(job).replica_specs() for t in LEADERS)
        if not has_leader and replica_type == WORKER and index == 0:
            return "master"
        return None

    def container_env(
        self,
        job: JobBase,
        replica_type: str,
        index: int,
        container: Mapping[str, Any],
        addressing: Addressing,
    ) -> list[EnvVar]:
        """``TF_CONFIG`` goes into the ``tensorflow`` container (else the first) only."""
        typed = _typed(job)
        target = main_container(typed.replica_specs()[replica_type].template, CONTAINER)
        if target is None or container.get("name") != target.get("name"):
            return []
        return replica_env(typed, replica_type, index, addressing)

    def run_container(self, job: JobBase, replica_type: str) -> str | None:
        return CONTAINER

    def start_order(self, job: JobBase) -> list[StartAfter]:
        return after_leader(job, LEADERS, (WORKER, EVALUATOR))

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        typed = _typed(job)
        specs = typed.replica_specs()
        leader = leader_first(typed, LEADERS)
        if leader is not None:
            return f"{replica_name(job.name, leader, 0)} completed" if done(leader, 0) else None
        workers = replicas_of(specs.get(WORKER))
        if not workers:
            return None
        if typed.spec.success_policy == SuccessPolicy.ALL_WORKERS:
            if all(done(WORKER, i) for i in range(workers)):
                return f"all {workers} workers completed"
            return None
        return f"{replica_name(job.name, WORKER, 0)} completed" if done(WORKER, 0) else None

    def tolerates_failure(self, job: JobBase, replica_type: str) -> bool:
        """With ``enableDynamicWorker``, a failed Worker does not fail the job."""
        return bool(_typed(job).spec.enable_dynamic_worker) and replica_type == WORKER


FRAMEWORK = TensorFlow()
