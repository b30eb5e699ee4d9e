"""TFJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, StrictBool

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.kinds import TENSORFLOW

KIND = TENSORFLOW.kind


class TFReplicaType(StrEnum):
    CHIEF = "Chief"
    MASTER = "Master"
    PS = "PS"
    WORKER = "Worker"
    EVALUATOR = "Evaluator"


class SuccessPolicy(StrEnum):
    """``""`` (default): the job succeeds when Worker 0 does; ``AllWorkers``: all must."""

    DEFAULT = ""
    ALL_WORKERS = "AllWorkers"


class TFJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    success_policy: SuccessPolicy | None = Field(
        default=None, description="'' (Worker 0 decides) or AllWorkers. Default: ''."
    )
    enable_dynamic_worker: StrictBool | None = Field(
        default=None, description="Sparse TF_CONFIG; Worker failures do not fail the job."
    )
    tf_replica_specs: dict[TFReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Chief/Master (at most one), PS, Worker, Evaluator; any letter case.",
    )


class TFJob(JobBase):
    """A TensorFlow distributed job, wire-compatible with Kubeflow's TFJob."""

    replica_specs_attr: ClassVar[str] = "tf_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["TFJob"] = "TFJob"
    spec: TFJobSpec
