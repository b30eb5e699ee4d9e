"""PaddleJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field

from kubetrain.api.base import KubeModel, MetricSpec, NonNegInt32
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.job_kind import JobKind
from kubetrain.api.kind_info import KUBEFLOW_GROUP, KindInfo
from kubetrain.api.pytorch import default_elastic_bounds
from kubetrain.api.rules import main_container_invariant

INFO = KindInfo(
    kind="PaddleJob",
    short="paddle",
    group=KUBEFLOW_GROUP,
    version="v1",
    plural="paddlejobs",
    singular="paddlejob",
    operator_name="paddlejob-controller",
    replica_specs_field="paddleReplicaSpecs",
    replica_types=("Master", "Worker"),
    main_container="paddle",
    port_name="master",
    default_port=36543,
    default_restart_policies=(("Master", "OnFailure"), ("Worker", "OnFailure")),
)


class PaddleReplicaType(StrEnum):
    MASTER = "Master"
    WORKER = "Worker"


class PaddleElasticPolicy(KubeModel):
    """Upstream's elastic policy of a PaddleJob: stored and defaulted, read by nothing (the
    operator, as upstream's v1.9 controller, injects no elastic settings and makes no HPA)."""

    min_replicas: NonNegInt32 | None = Field(
        default=None,
        description="Lower bound of Workers. Default: maxReplicas, else Worker replicas.",
    )
    max_replicas: NonNegInt32 | None = Field(
        default=None,
        description="Upper bound of Workers. Default: minReplicas, else Worker replicas.",
    )
    max_restarts: NonNegInt32 | None = Field(
        default=None, description="Restarts allowed in elastic mode. Default: none set."
    )
    metrics: list[MetricSpec] | None = Field(
        default=None, description="autoscaling/v2 metrics (kept, not acted on)."
    )


class PaddleJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    elastic_policy: PaddleElasticPolicy | None = None
    paddle_replica_specs: dict[PaddleReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Master (parameter-server mode) and Worker replica specs; Workers only "
        "is collective mode.",
    )


class PaddleJob(JobBase):
    """A PaddlePaddle distributed job, wire-compatible with Kubeflow's PaddleJob."""

    replica_specs_attr: ClassVar[str] = "paddle_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PaddleJob"] = "PaddleJob"
    spec: PaddleJobSpec


def _defaults(spec: dict[str, Any]) -> None:
    default_elastic_bounds(spec, INFO.replica_specs_field)


#: Upstream's webhook refuses only a replica without the ``paddle`` container (beside what
#: every kind's rules refuse); its message quotes the name.
JOB_KIND = JobKind(INFO, PaddleJob, (main_container_invariant(INFO, quoted=True),), _defaults)
