"""The JobSet-shaped template of a Trainer v2 runtime (``jobset.x-k8s.io/v1alpha2``
JobSetSpec, as JobSet v0.12.0 defines it, the version Trainer v2.3.0 pins).

kubetrain creates a TrainJob's pods itself, without JobSet, but keeps the runtime's
template in JobSet's shape so that upstream's runtimes and the Kubeflow SDK (which reads
``spec.template.spec.replicatedJobs``) work unchanged. Each replicated job's ``template``
is a batch ``JobTemplateSpec`` of the pinned Kubernetes release, pod template included.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictInt, StrictStr

from kubetrain.api.base import (
    Int32,
    K8sSchema,
    KubeModel,
    ListType,
    NonNegInt32,
    SchemaFormat,
    StoredDefault,
)

#: A batch/v1 JobTemplateSpec (metadata, and a JobSpec whose ``template`` is the pinned
#: PodTemplateSpec).
JobTemplateSpec = Annotated[dict[str, Any], K8sSchema("io.k8s.api.batch.v1.JobTemplateSpec")]
#: A core/v1 PersistentVolumeClaim (JobSet's volume claim templates).
PersistentVolumeClaim = Annotated[
    dict[str, Any], K8sSchema("io.k8s.api.core.v1.PersistentVolumeClaim")
]
#: Object metadata as a template carries it (labels, annotations, name, ...).
EmbeddedObjectMeta = Annotated[
    dict[str, Any], K8sSchema("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
]

#: Most replicated jobs a runtime may have: the four steps a TrainJob knows (dataset and
#: model initializers, launcher, node) and one more. A bound keeps the estimated cost of
#: the rules over each one's containers within the API server's budget (6 would exceed it).
MAX_REPLICATED_JOBS = 5

#: A 64-bit integer without bounds beyond the API server's own (JobSet's ``int`` fields).
Int64 = Annotated[StrictInt, SchemaFormat("int64")]


class DependsOnStatus(StrEnum):
    """What a replicated job waits for in the one it depends on."""

    READY = "Ready"
    COMPLETE = "Complete"


class DependsOn(KubeModel):
    """Start this replicated job only once another one is Ready or Complete."""

    name: StrictStr = Field(
        max_length=63, description="The replicated job depended on (an earlier one)."
    )
    status: DependsOnStatus = Field(description="Ready or Complete.")


class ReplicatedJob(KubeModel):
    """One group of identical Jobs of the runtime (``node``, ``launcher``,
    ``dataset-initializer``, ...); a TrainJob's pods are made from its template."""

    name: StrictStr = Field(
        max_length=63, description="Name of the replicated job, e.g. node or launcher."
    )
    group_name: Annotated[StrictStr | None, StoredDefault("default")] = Field(
        default=None, description="JobSet's group of replicated jobs. Default: default."
    )
    template: JobTemplateSpec = Field(description="The batch Job template (with its pods').")
    replicas: Annotated[NonNegInt32 | None, StoredDefault(1)] = Field(
        default=None, description="Jobs made from the template. Default: 1."
    )
    depends_on: Annotated[list[DependsOn], ListType("map", ("name",))] | None = Field(
        default=None,
        max_length=5,
        description="Replicated jobs that must be Ready or Complete before this one starts.",
    )


class Network(KubeModel):
    """DNS for the pods: a headless Service named after the job (or ``subdomain``)."""

    enable_dns_hostnames: StrictBool | None = Field(
        default=None, description="Pods get DNS hostnames. Default: true."
    )
    subdomain: StrictStr | None = Field(
        default=None, description="The headless Service's name. Default: the job's name."
    )
    publish_not_ready_addresses: StrictBool | None = Field(
        default=None, description="Resolve pods before they are Ready. Default: true."
    )


class SuccessOperator(StrEnum):
    ALL = "All"
    ANY = "Any"


class SuccessPolicy(KubeModel):
    """When the whole job has succeeded."""

    operator: SuccessOperator = Field(description="All or Any of the target jobs succeeded.")
    target_replicated_jobs: Annotated[list[StrictStr], ListType("atomic")] | None = Field(
        default=None, description="Replicated jobs that count. Default: all of them."
    )


class FailurePolicyAction(StrEnum):
    FAIL_JOB_SET = "FailJobSet"
    RESTART_JOB_SET = "RestartJobSet"
    RESTART_JOB_SET_AND_IGNORE_MAX_RESTARTS = "RestartJobSetAndIgnoreMaxRestarts"
    RESTART_JOB = "RestartJob"
    RESTART_JOB_AND_IGNORE_MAX_RESTARTS = "RestartJobAndIgnoreMaxRestarts"


class FailurePolicyRule(KubeModel):
    name: StrictStr
    action: FailurePolicyAction
    on_job_failure_reasons: list[StrictStr] | None = None
    on_job_failure_message_patterns: list[StrictStr] | None = None
    target_replicated_jobs: Annotated[list[StrictStr], ListType("atomic")] | None = None


class RestartStrategy(StrEnum):
    RECREATE = "Recreate"
    BLOCKING_RECREATE = "BlockingRecreate"
    IN_PLACE_RESTART = "InPlaceRestart"


class FailurePolicy(KubeModel):
    """How often, and how, the job is restarted after a failure."""

    max_restarts: Int32 | None = Field(default=None, description="Restarts allowed. Default: 0.")
    restart_strategy: Annotated[
        RestartStrategy | None, StoredDefault(RestartStrategy.RECREATE.value)
    ] = Field(
        default=None,
        description="Recreate, BlockingRecreate or InPlaceRestart. Default: Recreate.",
    )
    rules: list[FailurePolicyRule] | None = None


class StartupOrder(StrEnum):
    ANY_ORDER = "AnyOrder"
    IN_ORDER = "InOrder"


class StartupPolicy(KubeModel):
    startup_policy_order: StartupOrder = Field(description="AnyOrder or InOrder.")


class Coordinator(KubeModel):
    """The pod whose address every pod is told (JobSet's coordinator label)."""

    replicated_job: StrictStr
    job_index: Int64 | None = None
    pod_index: Int64 | None = None


class RetentionPolicyType(StrEnum):
    DELETE = "Delete"
    RETAIN = "Retain"


class VolumeRetentionPolicy(KubeModel):
    when_deleted: Annotated[
        RetentionPolicyType | None, StoredDefault(RetentionPolicyType.DELETE.value)
    ] = Field(default=None, description="Delete or Retain the claims. Default: Delete.")


class VolumeClaimPolicy(KubeModel):
    """Persistent volume claims created for the job and mounted by its pods."""

    templates: Annotated[list[PersistentVolumeClaim], ListType("atomic")] | None = Field(
        default=None, max_length=50
    )
    retention_policy: VolumeRetentionPolicy | None = None


class JobSetSpec(KubeModel):
    """The JobSet shape of a runtime's template (``spec.template.spec``)."""

    replicated_jobs: Annotated[list[ReplicatedJob], ListType("map", ("name",))] = Field(
        min_length=1,
        max_length=MAX_REPLICATED_JOBS,
        description="The groups of pods: node, launcher, dataset-initializer, ...",
    )
    network: Network | None = None
    success_policy: SuccessPolicy | None = None
    failure_policy: FailurePolicy | None = None
    startup_policy: StartupPolicy | None = None
    suspend: StrictBool | None = None
    coordinator: Coordinator | None = None
    managed_by: StrictStr | None = None
    ttl_seconds_after_finished: NonNegInt32 | None = None
    volume_claim_policies: Annotated[list[VolumeClaimPolicy], ListType("atomic")] | None = Field(
        default=None, max_length=50
    )


__all__ = [
    "Coordinator",
    "DependsOn",
    "DependsOnStatus",
    "EmbeddedObjectMeta",
    "FailurePolicy",
    "FailurePolicyRule",
    "JobSetSpec",
    "JobTemplateSpec",
    "Network",
    "ReplicatedJob",
    "StartupPolicy",
    "SuccessPolicy",
    "VolumeClaimPolicy",
]
