"""TFJob plugin: ``TF_CONFIG`` for each replica.

Upstream (training-operator v1.9) puts ``TF_CONFIG`` only into the container named
``tensorflow`` and only when the job has more than one replica in total. Hosts are the
per-replica Services ``<job>-<type>-<i>.<ns>.svc`` on each type's ``tfjob-port``
(default 2222); cluster keys are the lowercased replica types. With
``enableDynamicWorker`` the sparse form lists every PS but only this worker.
"""

from __future__ import annotations

import json
from typing import Any

from kubetrain.api.tensorflow import DEFAULT_CONTAINER, DEFAULT_PORT, PORT_NAME, TFJob
from kubetrain.controller.plugins.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.controller.plugins.common import declared_port, replicas_of

#: The container ``TF_CONFIG`` goes into.
CONTAINER = DEFAULT_CONTAINER


def cluster_spec(job: TFJob, addressing: Addressing) -> dict[str, list[str]]:
    """``{"worker": ["host:port", ...], "ps": [...], ...}`` for the whole job."""
    namespace = job.metadata.namespace or "default"
    cluster: dict[str, list[str]] = {}
    for rtype, spec in job.spec.tf_replica_specs.items():
        declared = declared_port(spec.template, DEFAULT_CONTAINER, PORT_NAME, DEFAULT_PORT)
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
    return [env_var("TF_CONFIG", json.dumps(config, separators=(",", ":")))]
