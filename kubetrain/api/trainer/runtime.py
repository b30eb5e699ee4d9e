"""TrainingRuntime (namespaced) and ClusterTrainingRuntime (cluster-scoped),
``trainer.kubeflow.org/v1alpha1``, schema-compatible with Kubeflow Trainer v2.3.0.

A runtime is the template a TrainJob starts from: its ML policy (nodes and at most one
framework: torch, MPI, JAX, XGBoost or Flux), an optional gang-scheduling policy and a
JobSet-shaped template of replicated jobs whose pods the TrainJob runs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from kubetrain.api.base import (
    KubeModel,
    ListType,
    MetricSpec,
    NonNegInt32,
    PositiveInt32,
    StoredDefault,
)
from kubetrain.api.common import ObjectMeta
from kubetrain.api.names import DNS1123_SUBDOMAIN_PATTERN, MAX_SUBDOMAIN
from kubetrain.api.trainer.constants import (
    DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
    DEFAULT_SSH_AUTH_MOUNT_PATH,
)
from kubetrain.api.trainer.jobset import EmbeddedObjectMeta, JobSetSpec, ReplicatedJob


class RuntimeMeta(ObjectMeta):
    """A runtime's metadata: its name is any DNS-1123 subdomain (``torchtune-llama3.2-1b``)."""

    name: StrictStr | None = Field(
        default=None,
        pattern=DNS1123_SUBDOMAIN_PATTERN,
        max_length=MAX_SUBDOMAIN,
        description="Runtime name: a DNS-1123 subdomain (lowercase letters, digits, '-', '.').",
    )


class EnvInjectionTarget(KubeModel):
    """Containers of one replicated job that also get the torch environment (PET_*)."""

    job_name: StrictStr = Field(
        min_length=1, max_length=253, description="The replicated job (e.g. node)."
    )
    container_names: Annotated[
        list[Annotated[StrictStr, Field(max_length=63)]], ListType("set")
    ] = Field(
        min_length=1,
        max_length=8,
        description="Its containers that get PET_* (node always does and is not listed).",
    )


class EnvInjection(KubeModel):
    targets: Annotated[list[EnvInjectionTarget], ListType("map", ("jobName",))] | None = Field(
        default=None, max_length=16
    )


class TorchElasticPolicy(KubeModel):
    """Elastic torchrun (KEP-2903's proposed ``elasticPolicy``, kubetrain's extension until
    upstream adopts one): the TrainJob's nodes may change between ``minNodes`` and
    ``maxNodes`` while it runs (its scale subresource), and torchrun re-forms the group."""

    min_nodes: PositiveInt32 = Field(description="Fewest nodes the training runs on (>= 1).")
    max_nodes: PositiveInt32 = Field(description="Most nodes (>= minNodes).")
    max_restarts: NonNegInt32 | None = Field(
        default=None,
        description="kubetrain: torchrun's --max-restarts (PET_MAX_RESTARTS). Default: torchrun's.",
    )
    metrics: list[MetricSpec] | None = Field(
        default=None,
        max_length=16,
        description="autoscaling/v2 metrics: the operator keeps a HorizontalPodAutoscaler "
        "scaling each TrainJob between minNodes and maxNodes on them.",
    )


class TorchMLPolicySource(KubeModel):
    """PyTorch (torchrun): the PET_* environment in the trainer's ``node`` container."""

    env_injection: EnvInjection | None = Field(
        default=None, description="Other containers that get the PET_* environment."
    )
    elastic_policy: TorchElasticPolicy | None = Field(
        default=None,
        description="Elastic training between minNodes and maxNodes (kubetrain's extension, "
        "after KEP-2903). Default: a fixed node count.",
    )


class MPIImplementation(StrEnum):
    """Only OpenMPI is implemented upstream; an empty value means OpenMPI."""

    OPEN_MPI = "OpenMPI"
    DEFAULT = ""


class MPIMLPolicySource(KubeModel):
    """MPI (OpenMPI over SSH): a launcher, a hostfile and an SSH key pair."""

    num_proc_per_node: Annotated[PositiveInt32 | None, StoredDefault(1)] = Field(
        default=None, description="Slots per node in the hostfile. Default: 1."
    )
    mpi_implementation: Annotated[
        MPIImplementation | None, StoredDefault(MPIImplementation.OPEN_MPI.value)
    ] = Field(default=None, description="OpenMPI. Default: OpenMPI.")
    ssh_auth_mount_path: Annotated[StrictStr | None, StoredDefault(DEFAULT_SSH_AUTH_MOUNT_PATH)] = (
        Field(
            default=None, max_length=4096, description="Where the SSH keys go. Default: /root/.ssh."
        )
    )
    run_launcher_as_node: Annotated[StrictBool | None, StoredDefault(False)] = Field(
        default=None, description="The launcher also runs ranks. Default: false."
    )


class FluxMLPolicySource(KubeModel):
    """Flux (HPC scheduler)."""

    num_proc_per_node: Annotated[PositiveInt32 | None, StoredDefault(1)] = Field(
        default=None, description="Processes per node. Default: 1."
    )


class JAXMLPolicySource(KubeModel):
    """JAX distributed (JAX_* environment); no settings."""


class XGBoostMLPolicySource(KubeModel):
    """XGBoost (DMLC_* environment, one worker per GPU or per node); no settings."""


class MLPolicy(KubeModel):
    """Nodes and at most one framework."""

    num_nodes: PositiveInt32 | None = Field(
        default=None, description="Training nodes, unless the TrainJob sets them. Default: 1."
    )
    # One field per policy source, in upstream's order (the CRD's one-framework rule lists
    # them so): their wire names are :data:`ML_POLICY_SOURCES`.
    torch: TorchMLPolicySource | None = None
    mpi: MPIMLPolicySource | None = None
    jax: JAXMLPolicySource | None = None
    xgboost: XGBoostMLPolicySource | None = None
    flux: FluxMLPolicySource | None = None

    def framework(self) -> str | None:
        """The framework this policy configures (one of :data:`ML_POLICY_SOURCES`), if any."""
        for name in ML_POLICY_SOURCES:
            if getattr(self, name) is not None:
                return name
        return None


#: The wire names of ``mlPolicy``'s framework sources (every field but ``numNodes``), read
#: from the model: the ML policies kubetrain implements are the registry's
#: (:mod:`kubetrain.frameworks.registry`); these are only the fields the API parses.
ML_POLICY_SOURCES: tuple[str, ...] = tuple(
    field.alias or name for name, field in MLPolicy.model_fields.items() if name != "num_nodes"
)


class CoschedulingPodGroupPolicySource(KubeModel):
    """Gang scheduling with the scheduler-plugins coscheduling plugin."""

    schedule_timeout_seconds: Annotated[
        NonNegInt32 | None, StoredDefault(DEFAULT_SCHEDULE_TIMEOUT_SECONDS)
    ] = Field(default=None, description="How long the gang may wait (0: the default). Default: 60.")


class NetworkTopologyMode(StrEnum):
    HARD = "hard"
    SOFT = "soft"


class NetworkTopologySpec(KubeModel):
    """Volcano's network topology constraint (with its HyperNode CRD)."""

    mode: Annotated[NetworkTopologyMode | None, StoredDefault(NetworkTopologyMode.HARD.value)] = (
        Field(default=None, description="hard or soft. Default: hard.")
    )
    highest_tier_allowed: Annotated[StrictInt | None, StoredDefault(1)] = Field(
        default=None, description="Highest network tier the gang may span. Default: 1."
    )


class VolcanoPodGroupPolicySource(KubeModel):
    """Gang scheduling with Volcano."""

    network_topology: NetworkTopologySpec | None = None


class PodGroupPolicy(KubeModel):
    """Gang scheduling: coscheduling or volcano, not both."""

    coscheduling: CoschedulingPodGroupPolicySource | None = None
    volcano: VolcanoPodGroupPolicySource | None = None


class JobSetTemplateSpec(KubeModel):
    """The template of the TrainJob's pods, in JobSet's shape."""

    metadata: EmbeddedObjectMeta | None = Field(
        default=None, description="Labels and annotations for the TrainJob's children."
    )
    spec: JobSetSpec = Field(description="Replicated jobs: node, launcher, initializers.")


class TrainingRuntimeSpec(KubeModel):
    ml_policy: MLPolicy | None = Field(
        default=None, description="Nodes and framework. The Kubeflow SDK requires it."
    )
    pod_group_policy: PodGroupPolicy | None = None
    template: JobSetTemplateSpec = Field(description="The pods a TrainJob of this runtime runs.")


class RuntimeBase(KubeModel):
    """Fields both runtime kinds have."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: StrictStr
    metadata: RuntimeMeta = Field(default_factory=RuntimeMeta)
    spec: TrainingRuntimeSpec

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    def replicated_jobs(self) -> list[ReplicatedJob]:
        """The template's replicated jobs, in order."""
        return list(self.spec.template.spec.replicated_jobs)


class TrainingRuntime(RuntimeBase):
    """A runtime TrainJobs of its own namespace can reference."""

    kind: Literal["TrainingRuntime"] = "TrainingRuntime"


class ClusterTrainingRuntime(RuntimeBase):
    """A runtime TrainJobs of every namespace can reference (cluster-scoped)."""

    kind: Literal["ClusterTrainingRuntime"] = "ClusterTrainingRuntime"
