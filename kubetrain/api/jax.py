"""JAXJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.job_kind import JobKind
from kubetrain.api.kind_info import KUBEFLOW_GROUP, KindInfo
from kubetrain.api.rules import main_container_invariant

INFO = KindInfo(
    kind="JAXJob",
    short="jax",
    group=KUBEFLOW_GROUP,
    version="v1",
    plural="jaxjobs",
    singular="jaxjob",
    operator_name="jaxjob-controller",
    replica_specs_field="jaxReplicaSpecs",
    replica_types=("Worker",),
    main_container="jax",
    port_name="jaxjob-port",
    default_port=6666,
    default_restart_policies=(("Worker", "Never"),),
    scale_replica_type="Worker",
)


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


#: Upstream's webhook refuses a replica without the ``jax`` container (beside what every
#: kind's rules refuse).
JOB_KIND = JobKind(INFO, JAXJob, (main_container_invariant(INFO),))
