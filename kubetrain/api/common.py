"""Types shared by every job kind: RunPolicy, ReplicaSpec, JobStatus and friends."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, StrictBool, StrictStr

from kubetrain.api.base import (
    DNS1035_PATTERN,
    Int32,
    KubeModel,
    LabelSelector,
    ListType,
    NonNegInt32,
    NonNegInt64,
    PodTemplateSpec,
    Quantity,
    StoredDefault,
    Time,
)
from kubetrain.api.progress_status import GoodputStatus, ProgressStatus, TrainerStatus


class CleanPodPolicy(StrEnum):
    """Which pods are deleted when a job finishes (default ``None``: keep them all)."""

    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class RestartPolicy(StrEnum):
    """How a replica's failed pods are handled.

    ``ExitCode`` sets the pod restartPolicy to Never; the operator recreates a pod whose
    exit code is >= 128 (killed by a signal: retryable) and fails the job on 1-127.
    """

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"


class ConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ObjectMeta(KubeModel):
    """Object metadata. Only ``name`` is typed here; fields the API server adds (uid,
    resourceVersion, managedFields, ...) are kept as extra fields, as they are, and
    ``kubetrain.api.meta`` refuses any name ObjectMeta does not have and checks labels,
    annotations and the other rules the server applies."""

    model_config = ConfigDict(extra="allow")

    name: StrictStr | None = Field(
        default=None,
        pattern=DNS1035_PATTERN,
        max_length=63,
        description="Job name: a DNS-1035 label (lowercase letters, digits, '-').",
    )
    generate_name: StrictStr | None = None
    namespace: StrictStr | None = None
    labels: dict[str, StrictStr] | None = None
    annotations: dict[str, StrictStr] | None = None


class SchedulingPolicy(KubeModel):
    """Gang-scheduling hints (Volcano / scheduler-plugins PodGroup)."""

    min_available: NonNegInt32 | None = Field(
        default=None, description="Pods that must be schedulable together. Default: all replicas."
    )
    queue: StrictStr | None = Field(default=None, description="Scheduler queue. Default: none.")
    min_resources: dict[str, Quantity] | None = Field(
        default=None, description="Resources the gang needs. Default: computed from replicas."
    )
    priority_class: StrictStr | None = Field(default=None, description="PriorityClass name.")
    schedule_timeout_seconds: NonNegInt32 | None = Field(
        default=None, description="How long the gang may wait to be scheduled."
    )


class RunPolicy(KubeModel):
    """Job-level policies, with the same shape for every kind."""

    # Not stored: left unset, the operator cleans up after the job as kubetrain documents
    # (kubetrain.controller.policies.cleanup), which a stored "None" would turn off.
    clean_pod_policy: CleanPodPolicy | None = Field(
        default=None,
        description="Pods deleted when the job finishes: All, Running or None. Default: "
        "kubetrain stops the pods still active (after a grace period on success).",
    )
    ttl_seconds_after_finished: NonNegInt32 | None = Field(
        default=None, description="Delete the job this long after it finished. Default: never."
    )
    active_deadline_seconds: NonNegInt64 | None = Field(
        default=None, description="Fail the job this long after it started. Default: no limit."
    )
    backoff_limit: NonNegInt32 | None = Field(
        default=None, description="Pods the operator may recreate before failing the job."
    )
    scheduling_policy: SchedulingPolicy | None = None
    suspend: Annotated[StrictBool | None, StoredDefault(False)] = Field(
        default=None, description="Suspended jobs have no pods. Default: false."
    )
    managed_by: StrictStr | None = Field(
        default=None,
        max_length=63,
        description="Controller that reconciles this job; any other value than kubetrain's "
        "or the upstream operator's makes kubetrain leave the job alone.",
    )


class ReplicaSpec(KubeModel):
    """One replica type (Master, Worker, PS, Launcher, ...)."""

    replicas: Annotated[NonNegInt32 | None, StoredDefault(1)] = Field(
        default=None, description="Pods of this type. Default: 1."
    )
    template: PodTemplateSpec = Field(description="Pod template for every replica of this type.")
    restart_policy: RestartPolicy | None = Field(
        default=None, description="Restart policy. Default depends on the kind."
    )


class JobCondition(KubeModel):
    type: ConditionType
    status: ConditionStatus
    reason: StrictStr | None = None
    message: StrictStr | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class ReplicaStatus(KubeModel):
    active: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    label_selector: LabelSelector | None = Field(default=None, description="Deprecated.")
    selector: StrictStr | None = Field(default=None, description="Label selector, serialized.")
    restarts: NonNegInt32 | None = Field(
        default=None,
        description="kubetrain: pods recreated after a failure.",
    )
    infrastructure_restarts: NonNegInt32 | None = Field(
        default=None,
        description="kubetrain: pods recreated after an infrastructure failure.",
    )
    counted_failures: Annotated[list[StrictStr], ListType("atomic")] | None = Field(
        default=None,
        description="kubetrain: counted failed pods not deleted yet.",
    )


class GangRestartStatus(KubeModel):
    """kubetrain: whole-gang restarts."""

    attempt: NonNegInt32 = Field(description="The gang's attempt: 0, +1 per gang restart.")
    trigger: StrictStr | None = Field(
        default=None, max_length=64, description="uid of the failed pod that started it."
    )
    infrastructure: NonNegInt32 | None = Field(
        default=None, description="Attempts infrastructure failures started."
    )
    reason: StrictStr | None = Field(
        default=None, max_length=64, description="The pod reason that started it."
    )
    since: Time | None = Field(default=None, description="When the attempt began.")
    hangs: NonNegInt32 | None = Field(default=None, description="Attempts hangs started.")


class JobStatus(KubeModel):
    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None
    ssh_auth_secret_name: StrictStr | None = Field(
        default=None,
        description="MPIJob: the Secret holding the job's SSH key pair, which the operator "
        "created under a generated name (kubetrain; it never reads or adopts Secrets).",
    )
    gang_restart: GangRestartStatus | None = Field(
        default=None,
        description="Whole-gang restarts made (kubetrain).",
    )
    trainer_status: TrainerStatus | None = Field(
        default=None, description="The last progress report's (kubetrain; TrainJob's field)."
    )
    progress: ProgressStatus | None = None
    goodput: GoodputStatus | None = None


class JobBase(KubeModel):
    """Fields every job kind has. Subclasses pin apiVersion/kind and the spec type."""

    api_version: StrictStr
    kind: StrictStr
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: JobStatus | None = None

    # Attribute of the spec holding the replica specs (e.g. ``pytorch_replica_specs``).
    replica_specs_attr: ClassVar[str] = ""

    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The replica specs keyed by replica type name."""
        specs: dict[Any, ReplicaSpec] = getattr(getattr(self, "spec"), self.replica_specs_attr)  # noqa: B009
        return {str(k): v for k, v in specs.items()}

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def run_policy(self) -> RunPolicy | None:
        """The job's run policy (every kind has one, under its spec)."""
        policy = getattr(getattr(self, "spec", None), "run_policy", None)
        return policy if isinstance(policy, RunPolicy) else None

    def summary(self) -> dict[str, Any]:
        """Replica counts by type (after defaulting semantics: missing replicas = 1)."""
        return {
            str(k): (1 if v.replicas is None else v.replicas)
            for k, v in self.replica_specs().items()
        }
