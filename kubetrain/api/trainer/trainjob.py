"""TrainJob (``trainer.kubeflow.org/v1alpha1``, namespaced), schema-compatible with
Kubeflow Trainer v2.3.0: what the Kubeflow SDK's ``TrainerClient().train(...)`` creates.

A TrainJob names a runtime (``runtimeRef``) and overrides what a user changes per run:
the trainer's image, command, args, env, node count, resources per node and processes per
node, the dataset and model initializers, and patches of the runtime's pod templates
(``runtimePatches``, keyed by who wrote them: the SDK, Kueue, a platform team).

Status is written by kubetrain's operator. Upstream's fields keep upstream's meaning;
kubetrain adds progress fields (``nodes``, ``readyNodes``, ``restarts``, ``startTime``,
``completionTime``) shown by ``kubectl get trainjobs``, so that no condition is needed
before the terminal one (any condition stops the SDK from reporting ``Running``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from kubetrain.api.base import (
    INT64_MAX,
    K8sSchema,
    KubeModel,
    ListType,
    NonNegInt32,
    PositiveInt32,
    SchemaFormat,
    StoredDefault,
    Time,
)
from kubetrain.api.common import GangRestartStatus, JobCondition, ObjectMeta, ReplicaStatus
from kubetrain.api.names import DNS1123_SUBDOMAIN_PATTERN, MAX_SUBDOMAIN
from kubetrain.api.progress_status import GoodputStatus, ProgressStatus, TrainerStatus
from kubetrain.api.trainer.constants import (
    DEFAULT_RUNTIME_API_GROUP,
    DEFAULT_RUNTIME_KIND,
    MANAGED_BY_VALUES,
)
from kubetrain.api.trainer.jobset import EmbeddedObjectMeta

EnvVar = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.EnvVar")]
ResourceRequirements = Annotated[
    dict[str, Any], K8sSchema("io.k8s.api.core.v1.ResourceRequirements")
]
LocalObjectReference = Annotated[
    dict[str, Any], K8sSchema("io.k8s.api.core.v1.LocalObjectReference")
]
Volume = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.Volume")]
VolumeMount = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.VolumeMount")]
SecurityContext = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.SecurityContext")]
PodSecurityContext = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.PodSecurityContext")]
Affinity = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.Affinity")]
Toleration = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.Toleration")]
PodSchedulingGate = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.PodSchedulingGate")]

#: An environment list: names unique, at most 128 (upstream's bound).
EnvList = Annotated[list[EnvVar], ListType("map", ("name",)), Field(max_length=128)]
#: A command or argument list: at most 128 items of at most 1 MiB each (upstream's bounds:
#: the SDK embeds the user's whole function in one item).
CommandList = Annotated[
    list[Annotated[StrictStr, Field(max_length=1048576)]],
    ListType("atomic"),
    Field(max_length=128),
]
PositiveInt64 = Annotated[StrictInt, Field(ge=1, le=INT64_MAX), SchemaFormat("int64")]
NonNegInt64 = Annotated[StrictInt, Field(ge=0, le=INT64_MAX), SchemaFormat("int64")]


class RuntimeRef(KubeModel):
    """The runtime a TrainJob starts from."""

    name: StrictStr = Field(
        min_length=1,
        max_length=MAX_SUBDOMAIN,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        description="The runtime (a TrainingRuntime: in the TrainJob's namespace).",
    )
    api_group: Annotated[StrictStr | None, StoredDefault(DEFAULT_RUNTIME_API_GROUP)] = Field(
        default=None, max_length=253, description=f"Default: {DEFAULT_RUNTIME_API_GROUP}."
    )
    kind: Annotated[StrictStr | None, StoredDefault(DEFAULT_RUNTIME_KIND)] = Field(
        default=None,
        max_length=253,
        description="ClusterTrainingRuntime (default) or TrainingRuntime.",
    )


class DatasetInitializer(KubeModel):
    """Where the dataset-initializer step downloads the dataset from."""

    storage_uri: StrictStr | None = Field(
        default=None, max_length=2048, description="scheme://... (hf://, s3://, ...) or empty."
    )
    env: EnvList | None = Field(default=None, description="Added to the step's container.")
    secret_ref: LocalObjectReference | None = Field(
        default=None, description="Secret (same namespace) with the credentials."
    )


class ModelInitializer(KubeModel):
    """Where the model-initializer step downloads the pre-trained model from."""

    storage_uri: StrictStr | None = Field(
        default=None, max_length=2048, description="scheme://... (hf://, s3://, ...) or empty."
    )
    env: EnvList | None = Field(default=None, description="Added to the step's container.")
    secret_ref: LocalObjectReference | None = Field(
        default=None, description="Secret (same namespace) with the credentials."
    )


class Initializer(KubeModel):
    dataset: DatasetInitializer | None = None
    model: ModelInitializer | None = None


class Trainer(KubeModel):
    """Overrides of the runtime's trainer (its ``node`` container and node count)."""

    image: StrictStr | None = Field(default=None, max_length=500, description="Container image.")
    command: CommandList | None = Field(default=None, description="Entrypoint.")
    args: CommandList | None = Field(default=None, description="Entrypoint arguments.")
    env: EnvList | None = Field(
        default=None, description="Merged into the runtime's; framework variables are refused."
    )
    num_nodes: PositiveInt32 | None = Field(
        default=None, description="Training nodes. Default: the runtime's mlPolicy.numNodes."
    )
    resources_per_node: ResourceRequirements | None = Field(
        default=None, description="Resources of each node's trainer container."
    )
    num_proc_per_node: PositiveInt32 | None = Field(
        default=None,
        description="Processes per node (torch: default auto; MPI: slots).",
    )


class ContainerPatch(KubeModel):
    """Changes to one container of the runtime's template (by name)."""

    name: StrictStr = Field(min_length=1, max_length=253, description="The runtime's container.")
    env: EnvList | None = Field(
        default=None,
        description="Not for node or the initializers.",
    )
    volume_mounts: (
        Annotated[list[VolumeMount], ListType("map", ("name",)), Field(max_length=128)] | None
    ) = None
    security_context: SecurityContext | None = None


ContainerPatchList = Annotated[
    list[ContainerPatch], ListType("map", ("name",)), Field(max_length=64)
]


class PodSpecPatch(KubeModel):
    """The pod fields a runtime patch may change."""

    service_account_name: StrictStr | None = Field(default=None, max_length=253)
    volumes: Annotated[list[Volume], ListType("map", ("name",)), Field(max_length=128)] | None = (
        None
    )
    init_containers: ContainerPatchList | None = None
    containers: ContainerPatchList | None = None
    image_pull_secrets: (
        Annotated[
            list[LocalObjectReference],
            ListType("map", ("name",), key_defaults=(("name", ""),)),
            Field(max_length=64),
        ]
        | None
    ) = None
    security_context: PodSecurityContext | None = None
    node_selector: dict[str, StrictStr] | None = None
    affinity: Affinity | None = None
    tolerations: Annotated[list[Toleration], ListType("atomic"), Field(max_length=128)] | None = (
        None
    )
    scheduling_gates: (
        Annotated[list[PodSchedulingGate], ListType("map", ("name",)), Field(max_length=16)] | None
    ) = None
    termination_grace_period_seconds: NonNegInt64 | None = None


class PodTemplatePatch(KubeModel):
    metadata: EmbeddedObjectMeta | None = Field(default=None, description="Labels, annotations.")
    spec: PodSpecPatch | None = None


class JobSpecPatch(KubeModel):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(KubeModel):
    metadata: EmbeddedObjectMeta | None = Field(default=None, description="Labels, annotations.")
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(KubeModel):
    name: StrictStr = Field(
        min_length=1, max_length=253, description="The runtime's replicated job to patch."
    )
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(KubeModel):
    replicated_jobs: (
        Annotated[list[ReplicatedJobPatch], ListType("map", ("name",)), Field(max_length=100)]
        | None
    ) = None


class JobSetTemplatePatch(KubeModel):
    metadata: EmbeddedObjectMeta | None = Field(default=None, description="Labels, annotations.")
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(KubeModel):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(KubeModel):
    """One writer's changes to the runtime's template for this TrainJob."""

    manager: StrictStr = Field(
        min_length=1,
        max_length=253,
        description="Its owner, e.g. kueue.x-k8s.io/manager.",
    )
    time: Time | None = Field(default=None, description="When the patch was last written.")
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None


class PodTemplateOverrideTargetJob(KubeModel):
    name: StrictStr = Field(
        min_length=1, max_length=253, description="A replicated job of the runtime."
    )


class PodTemplateOverride(KubeModel):
    """Trainer v2.1's change to the pod template of some of the runtime's replicated jobs
    (``runtimePatches`` replaced it in v2.2). Kept because Kueue v0.15 writes one per pod
    set on admission, with the ResourceFlavor's node selector and tolerations."""

    target_jobs: Annotated[
        list[PodTemplateOverrideTargetJob], ListType("atomic"), Field(min_length=1, max_length=16)
    ] = Field(description="The replicated jobs whose pods it changes.")
    metadata: EmbeddedObjectMeta | None = Field(default=None, description="Labels, annotations.")
    spec: PodSpecPatch | None = None


class TrainJobSpec(KubeModel):
    runtime_ref: RuntimeRef = Field(description="The runtime the TrainJob starts from.")
    initializer: Initializer | None = Field(
        default=None, description="Dataset and model initializer steps. Immutable."
    )
    trainer: Trainer | None = Field(
        default=None, description="Overrides of the runtime's trainer. Immutable."
    )
    runtime_patches: (
        Annotated[list[RuntimePatch], ListType("map", ("manager",)), Field(max_length=16)] | None
    ) = Field(
        default=None,
        description="Changed only while suspended.",
    )
    pod_template_overrides: (
        Annotated[list[PodTemplateOverride], ListType("atomic"), Field(max_length=16)] | None
    ) = Field(
        default=None,
        description="Trainer v2.1's runtimePatches (Kueue v0.15's), applied after them.",
    )
    suspend: Annotated[StrictBool | None, StoredDefault(False)] = Field(
        default=None, description="A suspended TrainJob has no pods. Default: false."
    )
    active_deadline_seconds: PositiveInt64 | None = Field(
        default=None,
        description="Fail it this long after it started or resumed. Immutable.",
    )
    managed_by: Annotated[StrictStr | None, StoredDefault(MANAGED_BY_VALUES[0])] = Field(
        default=None,
        max_length=253,
        description=f"{MANAGED_BY_VALUES[0]} (kubetrain) or "
        f"{MANAGED_BY_VALUES[1]}. Immutable. Default: the first.",
    )


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(KubeModel):
    """A metav1.Condition: ``Complete``, ``Failed`` or ``Suspended`` on a TrainJob."""

    type: StrictStr = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: ConditionStatus
    observed_generation: NonNegInt64 | None = None
    last_transition_time: Time
    reason: StrictStr = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    message: StrictStr = Field(max_length=32768)


class JobStatus(KubeModel):
    """One replicated job's counts; the SDK needs all six fields of every entry."""

    name: StrictStr = Field(min_length=1, max_length=253)
    ready: NonNegInt32
    succeeded: NonNegInt32
    failed: NonNegInt32
    active: NonNegInt32
    suspended: NonNegInt32


class Bookkeeping(KubeModel):
    """kubetrain's own record of the TrainJob's lifecycle, which the Kubeflow SDK never
    reads: the conditions it would have as a v1 job (Created, Running, Restarting,
    Succeeded, ...), the counts per replicated job with the restarts made, and the SSH
    Secret's generated name (MPI)."""

    conditions: Annotated[list[JobCondition], ListType("atomic"), Field(max_length=16)] | None = (
        None
    )
    replica_statuses: dict[str, ReplicaStatus] | None = None
    ssh_auth_secret_name: StrictStr | None = Field(default=None, max_length=253)
    gang_restart: GangRestartStatus | None = None
    progress: ProgressStatus | None = None
    goodput: GoodputStatus | None = None


class ElasticBounds(KubeModel):
    """The node bounds of an elastic TrainJob (its runtime's torch ``elasticPolicy``)."""

    min_nodes: PositiveInt32
    max_nodes: PositiveInt32


class TrainJobStatus(KubeModel):
    """Written by the operator (status subresource)."""

    conditions: (
        Annotated[list[Condition], ListType("map", ("type",)), Field(max_length=8)] | None
    ) = Field(
        default=None,
        description="Complete, Failed or Suspended; none while it runs (for the SDK).",
    )
    jobs_status: (
        Annotated[list[JobStatus], ListType("map", ("name",)), Field(max_length=100)] | None
    ) = Field(default=None, description="Counts per replicated job (node, launcher, ...).")
    trainer_status: TrainerStatus | None = None
    nodes: NonNegInt32 | None = Field(
        default=None,
        description="kubetrain: node pods the TrainJob runs.",
    )
    ready_nodes: NonNegInt32 | None = Field(
        default=None, description="kubetrain: node pods Ready, or Succeeded, now."
    )
    restarts: NonNegInt32 | None = Field(
        default=None,
        description="kubetrain: restarts counted against backoffLimit.",
    )
    start_time: Time | None = Field(
        default=None,
        description="kubetrain: when it last started or resumed.",
    )
    completion_time: Time | None = Field(
        default=None, description="kubetrain: when the TrainJob completed or failed."
    )
    state: StrictStr | None = Field(
        default=None,
        max_length=32,
        description="kubetrain: Created, Running, Restarting, Suspended, Complete or Failed.",
    )
    kubetrain: Bookkeeping | None = Field(
        default=None, description="kubetrain's record (the SDK does not read it)."
    )
    elastic: ElasticBounds | None = Field(
        default=None,
        description="kubetrain, elastic only: the bounds of spec.trainer.numNodes.",
    )
    selector: StrictStr | None = Field(
        default=None,
        max_length=1024,
        description="kubetrain, elastic only: the node pods' selector (scale's).",
    )


class TrainJob(KubeModel):
    """A training run of a runtime: what the Kubeflow SDK creates."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainJob"] = "TrainJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    status: TrainJobStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""
