"""The operator's shared vocabulary: the plain values the draft, the policies and the
plugins pass between them, and nothing that decides anything.

- what the informers observed of a job's children (:class:`Observed`);
- what a plugin reads of a job (:class:`Loaded`), the pods it should have
  (:class:`Replica`), what waits for what at startup (:class:`StartupRule`) and how a
  job ended (:class:`Outcome`);
- what the policies concluded for the ones after them: the startup gate (:class:`Gate`)
  and the restart verdict (:class:`RestartVerdict`);
- how many children one reconcile writes at most (:data:`WRITE_BATCH`).

This module imports nothing of the operator's but the pod-state vocabulary: every layer
above it (policies, plugins, the draft and planner, the reconciler) may use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from kubetrain.api import keys as K
from kubetrain.api.common import CleanPodPolicy, ConditionType, JobBase, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.controller.podstate import Termination

Obj = Mapping[str, Any]
#: The job type a plugin reconciles (an MPIJob, a resolved TrainJob, ...).
J = TypeVar("J", bound=JobBase)

#: Children created or applied (and surplus ones deleted) in one reconcile at most.
#: At the default 20 API requests per second a batch is 2.5 s of writes: the longest a
#: small job's creations wait behind a huge job's in the shared write pool.
WRITE_BATCH = 50


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
    #: The job's HorizontalPodAutoscaler (elastic jobs with metrics), by name.
    autoscalers: Mapping[str, Obj] = field(default_factory=dict)
    now: datetime = field(default_factory=_epoch)
    #: A TrainJob's runtime (TrainingRuntime or ClusterTrainingRuntime), when it exists.
    runtime: Obj | None = None
    #: The data of a TrainJob's runtime snapshot ConfigMap, when it has one
    #: (``runtime_snapshot``: the runtime it was started with).
    runtime_snapshot: Mapping[str, Any] | None = None
    #: The nodes the job's pods are bound to, by name (None: a node the cache does not
    #: hold, i.e. deleted); None as a whole when the operator does not watch nodes.
    nodes: Mapping[str, Obj | None] | None = None

    def by_kind(self, kind: str) -> Mapping[str, Obj]:
        """The observed children of one kind (``Pod``, ``Service``, ...)."""
        return {
            "Pod": self.pods,
            "Service": self.services,
            "ConfigMap": self.config_maps,
            "Secret": self.secrets,
            "Job": self.batch_jobs,
            "PodGroup": self.pod_groups,
            "HorizontalPodAutoscaler": self.autoscalers,
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
class Loaded(Generic[J]):
    """A job as its plugin reads it (defaulted), or the problems that keep it from
    running."""

    job: J | None
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


@dataclass(frozen=True)
class Gate:
    """The verdict of the startup gate for one job (``policies/startup``); the plugins
    leave the pods of its ``blocked`` replica types out of the children they build."""

    #: Replica types whose missing pods must not be created yet.
    blocked: frozenset[str] = frozenset()
    #: Rules still waiting (for messages and Events).
    waiting: tuple[StartupRule, ...] = ()
    #: Set when a rule waited longer than the timeout: the job must fail.
    timed_out: StartupRule | None = None
    timeout_detail: str = ""
    #: Seconds until the earliest waiting rule times out.
    requeue_after: float | None = None
    problems: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Recreate:
    """A failed pod to delete; the build step creates it again."""

    replica: Replica
    uid: str
    cause: Termination
    #: False when this failure was already counted (its deletion is still pending).
    counted_now: bool
    #: The restart this recreation is against backoffLimit (1 for the first), when
    #: counted now; 0 when it was counted before.
    used: int = 0
    #: The limit it counts against (None: no limit).
    limit: int | None = None
    #: An infrastructure failure (evicted, preempted, node lost): ``used`` and ``limit``
    #: are then the job's infrastructure restarts, and backoffLimit is untouched.
    infrastructure: bool = False


@dataclass(frozen=True)
class InPlaceRestart:
    """One in-place container restart of a live pod (one ``restartCount`` step) that
    the operator had not seen yet."""

    pod: str
    replica_type: str
    uid: str
    #: The pod's ``restartCount`` this restart brought it to.
    count: int
    #: Its cause; None for a restart followed by another before the operator looked
    #: (``lastState`` only tells the latest).
    cause: Termination | None
    #: The restart this one is against backoffLimit (1 for the first).
    used: int = 0
    #: The limit it counts against (None: no limit).
    limit: int | None = None


@dataclass(frozen=True)
class RestartVerdict:
    """The restart decision for one job (``policies/restart``): pods to recreate, or the
    failure that ends it."""

    recreate: tuple[Recreate, ...] = ()
    #: Set when a failure ends the job.
    failure: Outcome | None = None
    #: Restarts per replica type the operator has made (the persisted counter).
    restarts: Mapping[str, int] = field(default_factory=dict)
    #: Recreations after infrastructure failures per replica type (persisted apart).
    infrastructure: Mapping[str, int] = field(default_factory=dict)
    #: Restarts used against backoffLimit (recreations + in-place restarts).
    used: int = 0
    #: The in-place restarts within the limit not seen before, one per restart, in order.
    in_place: tuple[InPlaceRestart, ...] = ()
    #: Per replica type, the uids of failed pods counted and not yet gone (persisted).
    counted: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: The in-place restart counts looked at now, by pod uid (what to remember).
    restart_counts: Mapping[str, int] = field(default_factory=dict)


S = TypeVar("S", bound=BaseModel)


def status_or_empty(model: type[S], raw_status: Any) -> S:
    """A job's ``status`` read as ``model``; an empty one when it does not parse (a status
    another controller or a person wrote in another shape is rewritten, not fatal)."""
    try:
        return model.model_validate(raw_status or {})
    except ValidationError:
        return model()
