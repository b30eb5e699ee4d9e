"""XGBoostJob (kubeflow.org/v1): a Rabit tracker on the Master, Workers joining it (the
same kind also runs LightGBM's distributed training)."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.kinds import XGBOOST

KIND = XGBOOST.kind


class XGBoostReplicaType(StrEnum):
    MASTER = "Master"
    WORKER = "Worker"


class XGBoostJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    xgb_replica_specs: dict[XGBoostReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Master (required, exactly one replica: the tracker) and Worker.",
    )


class XGBoostJob(JobBase):
    """A distributed XGBoost (or LightGBM) job, wire-compatible with Kubeflow's XGBoostJob."""

    replica_specs_attr: ClassVar[str] = "xgb_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["XGBoostJob"] = "XGBoostJob"
    spec: XGBoostJobSpec
