"""What a framework plugin is: small capability methods over a defaulted job and the
observed state of its children, all pure.

- ``load(raw, observed)``: the job as written and defaulted (a TrainJob resolved against
  its runtime), or why it cannot run;
- ``status_codec``: how the kind's status reads and writes (a TrainJob's differs from the
  v1 kinds');
- ``validate(job)``: problems only the operator checks (the typed API checked the rest);
- ``replicas(job)``: the pods the job should have, one per replica index;
- ``startup_rules(job)``: which replica types wait for which others to be Ready;
- ``build(job, observed)``: the desired children, with startup gating applied (lazily);
- ``status(job, observed)``: replica counts and selectors (conditions are the
  reconciler's, from the outcome and the policies);
- ``outcome(job, observed)``: success (or, for MPI, the launcher Job's failure);
- ``is_running(job, observed)``: whether the job counts as Running;
- ``tolerates_failure(job, replica)``: a failed pod of this replica is ignored (TF
  dynamic workers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from kubetrain.api import keys as K
from kubetrain.api.common import CleanPodPolicy, ConditionType, JobStatus, RestartPolicy
from kubetrain.api.common import JobBase as Job
from kubetrain.api.errors import FieldError
from kubetrain.controller.gang import Gang, GangConfig

Obj = Mapping[str, Any]


def _epoch() -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Observed:
    """A job's children as the informer caches hold them (trimmed), each by name.

    Launcher pods of an MPIJob (named by the batch Job controller) are in ``pods`` too.
    """

    pods: Mapping[str, Obj] = field(default_factory=dict)
    services: Mapping[str, Obj] = field(default_factory=dict)
    config_maps: Mapping[str, Obj] = field(default_factory=dict)
    secrets: Mapping[str, Obj] = field(default_factory=dict)
    #: The SSH Secret's name as the job's status records it (chosen before it is
    #: created); in ``secrets`` too once it surely exists.
    ssh_secret_name: str | None = None
    batch_jobs: Mapping[str, Obj] = field(default_factory=dict)
    #: The job's PodGroup (gang scheduling), by name.
    pod_groups: Mapping[str, Obj] = field(default_factory=dict)
    now: datetime = field(default_factory=_epoch)
    #: A TrainJob's runtime (TrainingRuntime or ClusterTrainingRuntime), when it exists.
    runtime: Obj | None = None
    #: The data of a TrainJob's runtime snapshot ConfigMap, when it has one
    #: (``runtime_snapshot``: the runtime it was started with).
    runtime_snapshot: Mapping[str, Any] | None = None

    def by_kind(self, kind: str) -> Mapping[str, Obj]:
        """The observed children of one kind (``Pod``, ``Service``, ...)."""
        return {
            "Pod": self.pods,
            "Service": self.services,
            "ConfigMap": self.config_maps,
            "Secret": self.secrets,
            "Job": self.batch_jobs,
            "PodGroup": self.pod_groups,
        }[kind]


@dataclass(frozen=True)
class Replica:
    """One pod the job should have."""

    replica_type: str
    index: int
    pod_name: str
    restart_policy: RestartPolicy
    main_container: str


@dataclass(frozen=True)
class StartupRule:
    """Children of the ``waiting`` replica types are created only once every pod in
    ``needed_pods`` is Ready (or has succeeded) and every Service in ``needed_services``
    exists (so the names the waiting replicas connect to resolve)."""

    waiting: tuple[str, ...]
    needed_pods: tuple[str, ...]
    needed_services: tuple[str, ...]
    #: What waits and what for, in words (e.g. "the launcher", "the workers").
    waiting_label: str
    needed_label: str
    #: ``Ready``, or ``Complete``: the needed pods must have succeeded (a TrainJob's
    #: initializers before its nodes).
    until: str = "Ready"


@dataclass(frozen=True)
class Outcome:
    """A job-level verdict from the framework's success rule."""

    condition: ConditionType  # SUCCEEDED or FAILED
    reason: str
    message: str
    #: When it happened, if a child says so (an MPI launcher Job's completionTime).
    at: str | None = None
    #: The replica type whose pod's failure ended the job, when one did.
    replica_type: str | None = None


@dataclass(frozen=True)
class Loaded:
    """A job as its plugin reads it (defaulted), or the problems that keep it from
    running."""

    job: Job | None
    #: ``runPolicy.cleanPodPolicy`` as written (None: unset, so kubetrain's default
    #: applies), the one choice defaulting hides that the policies need. Only that is
    #: kept of the job as written: a second typed copy of every job cost memory.
    declared_clean_pod_policy: CleanPodPolicy | None = None
    errors: Sequence[FieldError] = ()
    #: The Failed reason when it cannot run.
    reason: str = K.INVALID_SPEC
    #: Look again this many seconds from now instead of failing (e.g. a runtime that may
    #: still be on its way).
    retry_after: float | None = None
    #: Children made at the job's first reconcile, whatever else it does, and never
    #: changed (a TrainJob's runtime snapshot); only those it lacks.
    pinned: Sequence[dict[str, Any]] = ()


class StatusCodec(Protocol):
    """How a kind's status is read into the operator's model and written back."""

    def read(self, raw_status: Any) -> JobStatus:
        """The status as the policies see it (an unreadable one is empty)."""
        ...

    def write(self, job: Job | None, status: JobStatus, observed: Observed) -> dict[str, Any]:
        """The wire status for ``status`` (``observed`` for what it reports of the pods)."""
        ...

    def normalized(self, raw_status: Any) -> dict[str, Any]:
        """The current wire status as :meth:`write` would spell it, for comparisons."""
        ...


class JobPlugin(Protocol):
    """One framework (job kind)."""

    kind: str
    #: The kinds of children the operator watches for this kind's jobs.
    child_kinds: tuple[str, ...]
    #: What ``ttlSecondsAfterFinished`` deletes: ``job`` (the v1 training operator's
    #: kinds), ``launcher`` (the MPIJob's launcher Job, as mpi-operator does) or
    #: ``children`` (a TrainJob's pods and Services, as upstream's JobSet TTL does): the
    #: last two keep the job and its status.
    ttl_deletes: str
    #: Whether the replica type whose failure ended the job is counted failed in its
    #: replica status though no pod of it reached phase Failed (a container that used
    #: up its restarts in place): a TrainJob's replicated job is a Job, and that Job
    #: failed. The v1 kinds count pods in phase Failed, as upstream does.
    counts_failed_replica: bool
    status_codec: StatusCodec
    #: The operator's gang scheduler (None: off); set by the registry.
    gang: GangConfig | None

    def gang_of(self, job: Job) -> Gang | None:
        """The gang the job is scheduled as (None: its pods are scheduled one by one)."""
        ...

    def backoff_limits(self, job: Job) -> Mapping[str, int] | None:
        """Per replica type, its own backoffLimit counted as the Job controller counts
        (``policies/batch_restart``); None: the job-wide ``runPolicy.backoffLimit`` of
        the v1 kinds' restart model."""
        ...

    def spec_stamp(self, raw: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
        """A JSON patch of the job itself that the operator writes before reconciling it
        (a TrainJob's runtimePatches times, as Trainer's webhook stamps them); None when
        there is nothing to write. ``now`` is RFC 3339 at second precision."""
        ...

    def serving_replica_types(self, job: Job) -> tuple[str, ...]:
        """Replica types whose pods never end by themselves (MPI workers serve ``sshd``):
        after a success they are stopped without a grace period."""
        ...

    def load(self, raw: Mapping[str, Any], observed: Observed) -> Loaded:
        """The job defaulted (and resolved), or why it cannot run."""
        ...

    def validate(self, job: Job) -> list[FieldError]:
        """Problems only the operator checks (the typed API checked the rest)."""
        ...

    def replicas(self, job: Job) -> list[Replica]:
        """The pods the job should have, one per replica index, in a stable order."""
        ...

    def tolerates_failure(self, job: Job, replica: Replica) -> bool:
        """True when a failed pod of ``replica`` is ignored (TF dynamic workers)."""
        ...

    def startup_rules(self, job: Job) -> list[StartupRule]:
        """Which replica types wait for which pods to be Ready before starting."""
        ...

    def build(self, job: Job, observed: Observed) -> Iterator[dict[str, Any]]:
        """The desired children now (gated replicas' pods left out), one at a time, in a
        stable order; pure. Lazy, so that a reconcile that stops after a batch never
        builds the rest of a large job's children."""
        ...

    def status(self, job: Job, observed: Observed) -> JobStatus:
        """Replica counts and selectors (``replicaStatuses``); conditions are the planner's."""
        ...

    def outcome(self, job: Job, observed: Observed) -> Outcome | None:
        """Success (or, for MPI, the launcher Job's failure) when the job has ended."""
        ...

    def is_running(self, job: Job, observed: Observed) -> bool:
        """Whether the job counts as Running (upstream: every replica's pod runs)."""
        ...
