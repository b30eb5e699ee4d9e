"""PyTorchJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictBool, StrictStr

from kubetrain.api.base import (
    KubeModel,
    MetricSpec,
    NonNegInt32,
    Port,
    PositiveInt32,
    StoredDefault,
)
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.kinds import PYTORCH

KIND = PYTORCH.kind
NPROC_PATTERN = r"^(auto|cpu|gpu|[1-9][0-9]*)$"


class PyTorchReplicaType(StrEnum):
    MASTER = "Master"
    WORKER = "Worker"


class RdzvBackend(StrEnum):
    C10D = "c10d"
    ETCD = "etcd"
    ETCD_V2 = "etcd-v2"


class RdzvConf(KubeModel):
    key: StrictStr
    value: StrictStr


class ElasticPolicy(KubeModel):
    """torchrun elastic launch settings (the PET_* environment)."""

    min_replicas: PositiveInt32 | None = Field(
        default=None,
        description="Lower bound of nodes. Default: maxReplicas, else Worker replicas.",
    )
    max_replicas: PositiveInt32 | None = Field(
        default=None,
        description="Upper bound of nodes. Default: minReplicas, else Worker replicas.",
    )
    rdzv_backend: Annotated[RdzvBackend | None, StoredDefault(RdzvBackend.C10D.value)] = Field(
        default=None, description="Default: c10d."
    )
    rdzv_port: Port | None = Field(default=None, description="Default: the Worker's port.")
    rdzv_host: StrictStr | None = Field(default=None, description="Default: <job>-worker-0.")
    rdzv_id: StrictStr | None = Field(default=None, description="Default: the job's UID.")
    rdzv_conf: list[RdzvConf] | None = None
    standalone: StrictBool | None = None
    n_proc_per_node: PositiveInt32 | None = Field(
        default=None, description="Deprecated: use spec.nprocPerNode."
    )
    max_restarts: NonNegInt32 | None = None
    metrics: list[MetricSpec] | None = Field(
        default=None, description="autoscaling/v2 metrics; non-empty creates an HPA."
    )


class PyTorchJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: StrictStr | None = Field(
        default=None,
        pattern=NPROC_PATTERN,
        description="Processes per node: auto, cpu, gpu or a positive integer. Default: auto.",
    )
    pytorch_replica_specs: dict[PyTorchReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Master (exactly one replica) and Worker (at least one) replica specs.",
    )


class PyTorchJob(JobBase):
    """A PyTorch DDP / torchrun job, wire-compatible with Kubeflow's PyTorchJob."""

    replica_specs_attr: ClassVar[str] = "pytorch_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    spec: PyTorchJobSpec
