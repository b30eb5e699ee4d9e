"""JAXJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.kinds import JAX

KIND = JAX.kind


class JAXReplicaType(StrEnum):
    WORKER = "Worker"


class JAXJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    jax_replica_specs: dict[JAXReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Worker only: every Worker is one JAX process; Worker 0 coordinates.",
    )


class JAXJob(JobBase):
    """A JAX distributed job, wire-compatible with Kubeflow's JAXJob."""

    replica_specs_attr: ClassVar[str] = "jax_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["JAXJob"] = "JAXJob"
    spec: JAXJobSpec
