"""What a TrainJob's nodes have, read from its resolved pod templates: the trainer
container, its GPUs and CPUs, and the host of its rank 0. The TrainJob's ML policies
(:mod:`kubetrain.frameworks.registry`) all read them here."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubetrain.api import quantity
from kubetrain.api.common import JobBase
from kubetrain.api.keys import GPU_RESOURCE, JOB_COMPLETION_INDEX
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, ReplicaRef


def typed(job: JobBase) -> ResolvedTrainJob:
    if not isinstance(job, ResolvedTrainJob):
        raise TypeError(f"the TrainJob framework got a {job.kind}, expected a resolved TrainJob")
    return job


def container(job: ResolvedTrainJob, replicated_job: str, name: str) -> Mapping[str, Any]:
    """Container ``name`` of a replicated job's pod template (empty when absent)."""
    spec = job.spec.replicated_jobs.get(replicated_job)
    pod = (spec.template.get("spec") or {}) if spec is not None else {}
    found: Mapping[str, Any] = next(
        (c for c in pod.get("containers") or [] if c.get("name") == name), {}
    )
    return found


def _amount(resources: Mapping[str, Any], key: str) -> Decimal | None:
    for part in ("limits", "requests"):
        value = (resources.get(part) or {}).get(key)
        if value is not None:
            return quantity.amount(value)
    return None


def gpus_per_node(job: ResolvedTrainJob) -> int:
    """GPUs of the trainer's ``node`` container (limits, else requests)."""
    node = container(job, job.spec.trainer_job, T.NODE)
    amount = _amount(node.get("resources") or {}, GPU_RESOURCE)
    return int(amount) if amount is not None else 0


def cpus_per_node(job: ResolvedTrainJob) -> int:
    """Whole CPUs of the trainer's ``node`` container (request, else limit, rounded up;
    at least 1), as upstream's torch plugin counts them."""
    node = container(job, job.spec.trainer_job, T.NODE)
    resources = node.get("resources") or {}
    request = (resources.get("requests") or {}).get("cpu")
    limit = (resources.get("limits") or {}).get("cpu")
    value = request if request is not None else limit
    if value is None:
        return 1
    count = quantity.amount(value)
    return max(1, int(count.to_integral_value(rounding=ROUND_CEILING)))


def rank_zero(job: ResolvedTrainJob, addressing: Addressing) -> str:
    """The host of the trainer's pod 0 (the rendezvous of the policies that have one)."""
    return addressing.trainjob_host(job.name, job.spec.trainer_job, 0)


def rank_zero_port(job: ResolvedTrainJob, addressing: Addressing, port: int) -> int:
    """The port ``port`` of the trainer's pod 0 is reached on (locally, the one handed out)."""
    rank_zero_ref = ReplicaRef(
        job_name=job.name,
        namespace=job.metadata.namespace or "default",
        replica_type=job.spec.trainer_job,
        index=0,
    )
    return addressing.replica_port(rank_zero_ref, port)


#: Where a TrainJob pod's index is read from: the Job controller's completion-index
#: annotation, which every TrainJob pod carries (upstream's plugins read it the same way).
COMPLETION_INDEX_FIELD = f"metadata.annotations['{JOB_COMPLETION_INDEX}']"


def index_env(name: str) -> EnvVar:
    """Variable ``name`` holding the pod's index, from its completion-index annotation."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}
