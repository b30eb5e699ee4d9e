"""What a framework plugin is: small capability methods over a defaulted job and the
observed state of its children, all pure. A plugin is generic in the job type it
reconciles (``JobPlugin[MPIJob]``): what ``load`` returns is what every other method
receives, so no method casts the job.

Every plugin implements:

- ``load(raw, observed)``: the job as written and defaulted (a TrainJob resolved against
  its runtime), or why it cannot run;
- ``replicas(job)``: the pods the job should have, one per replica index;
- ``build(job, observed, gate)``: the desired children, the pods of the replica types
  the startup gate holds back left out (lazily);
- ``status(job, observed)``: replica counts and selectors (conditions are the
  reconciler's, from the outcome and the policies);
- ``outcome(job, observed)``: success (or, for MPI, the launcher Job's failure);
- ``is_running(job, observed)``: whether the job counts as Running.

A plugin that subclasses :class:`JobPlugin` inherits the Kubeflow v1 kinds' answer to
the rest and overrides what differs: ``status_codec`` (a TrainJob's status differs),
``validate(job)`` (problems only the operator checks; none), ``startup_rules(job)``
(which replica types wait for which others; none), ``gang_of(job)`` (every replica is
one gang when the operator has a gang scheduler), ``tolerates_failure(job, replica)``
(a failed pod of this replica is ignored, as TF dynamic workers are; never),
``backoff_limits(job)`` (one job-wide backoffLimit), ``spec_stamp(raw, now)`` (nothing
to write), ``serving_replica_types(job)`` (none), ``ttl_deletes`` (the job) and
``counts_failed_replica`` (no).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubetrain.api.common import JobBase, JobStatus
from kubetrain.api.errors import FieldError
from kubetrain.controller import gang as G
from kubetrain.controller.model import Gate, J, Loaded, Observed, Outcome, Replica, StartupRule
from kubetrain.controller.plugins import v1
from kubetrain.controller.plugins.progress_env import ProgressInjection
from kubetrain.frameworks.elastic import Autoscaling


class StatusCodec(Protocol):
    """How a kind's status is read into the operator's model and written back."""

    def read(self, raw_status: Any) -> JobStatus:
        """The status as the policies see it (an unreadable one is empty)."""
        ...

    def write(self, job: JobBase | None, status: JobStatus, observed: Observed) -> dict[str, Any]:
        """The wire status for ``status`` (``observed`` for what it reports of the pods)."""
        ...

    def normalized(self, raw_status: Any) -> dict[str, Any]:
        """The current wire status as :meth:`write` would spell it, for comparisons."""
        ...


@dataclass(frozen=True)
class Scaled:
    """What a job's scale subresource moves (``policies/scaling`` announces its changes)."""

    key: str
    """The replicas it counts (a PyTorchJob's ``Worker``, a TrainJob's trainer job)."""
    count: int
    """How many the spec asks for now."""
    present: int
    """How many have a child now (before a change is carried out: the count before it,
    for an operator that just started)."""
    unit: str
    """What they are called in messages (``workers``, ``nodes``)."""


class JobPlugin(Protocol[J]):
    """One framework (job kind), reconciling jobs of type ``J`` (see the module docs).

    The methods with a body are defaults: a plugin that subclasses this class explicitly
    inherits them; the others it must implement (the type checker refuses to create one
    that does not)."""

    kind: str
    #: The kinds of children the operator watches for this kind's jobs.
    child_kinds: tuple[str, ...]
    #: What ``ttlSecondsAfterFinished`` deletes: ``job`` (the v1 training operator's
    #: kinds), ``launcher`` (the MPIJob's launcher Job, as mpi-operator does) or
    #: ``children`` (a TrainJob's pods and Services, as upstream's JobSet TTL does): the
    #: last two keep the job and its status.
    ttl_deletes: str = "job"
    #: Whether the replica type whose failure ended the job is counted failed in its
    #: replica status though no pod of it reached phase Failed (a container that used
    #: up its restarts in place): a TrainJob's replicated job is a Job, and that Job
    #: failed. The v1 kinds count pods in phase Failed, as upstream does.
    counts_failed_replica: bool = False
    status_codec: StatusCodec = v1.V1_STATUS
    #: The operator's gang scheduler (None: off); set by the registry.
    gang: G.GangConfig | None = None
    #: The progress server's environment for the job's pods (None: no server); set by
    #: the operator.
    progress: ProgressInjection | None = None

    # -- what every plugin implements -----------------------------------------------------

    def load(self, raw: Mapping[str, Any], observed: Observed) -> Loaded[J]:
        """The job defaulted (and resolved), or why it cannot run."""
        ...

    def replicas(self, job: J) -> list[Replica]:
        """The pods the job should have, one per replica index, in a stable order."""
        ...

    def build(self, job: J, observed: Observed, gate: Gate) -> Iterator[dict[str, Any]]:
        """The desired children now, one at a time, in a stable order; pure. The pods of
        the replica types ``gate`` blocks (the startup policy's verdict) are left out.
        Lazy, so that a reconcile that stops after a batch never builds the rest of a
        large job's children."""
        ...

    def status(self, job: J, observed: Observed) -> JobStatus:
        """Replica counts and selectors (``replicaStatuses``); conditions are the planner's."""
        ...

    def outcome(self, job: J, observed: Observed) -> Outcome | None:
        """Success (or, for MPI, the launcher Job's failure) when the job has ended."""
        ...

    def is_running(self, job: J, observed: Observed) -> bool:
        """Whether the job counts as Running (upstream: every replica's pod runs)."""
        ...

    # -- defaults: the Kubeflow v1 kinds' answers -------------------------------------------

    def validate(self, job: J) -> list[FieldError]:
        """Problems only the operator checks (the typed API checked the rest): none."""
        return []

    def startup_rules(self, job: J) -> list[StartupRule]:
        """Which replica types wait for which pods to be Ready before starting: none."""
        return []

    def gang_of(self, job: J) -> G.Gang | None:
        """The gang the job is scheduled as (None: its pods are scheduled one by one):
        every replica of the job when the operator has a gang scheduler."""
        return G.gang_of(job, self.gang, job.replica_specs())

    def tolerates_failure(self, job: J, replica: Replica) -> bool:
        """True when a failed pod of ``replica`` is ignored (TF dynamic workers)."""
        return False

    def autoscaling(self, job: J) -> Autoscaling | None:
        """The HorizontalPodAutoscaler the job owns (``plugins/autoscaler``); None: none,
        and one it owned is deleted."""
        return None

    def backoff_limits(self, job: J) -> Mapping[str, int] | None:
        """Per replica type, its own backoffLimit counted as the Job controller counts
        (``policies/batch_restart``); None: the job-wide ``runPolicy.backoffLimit`` of
        the v1 kinds' restart model."""
        return None

    def spec_stamp(self, raw: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
        """A JSON patch of the job itself that the operator writes before reconciling it
        (a TrainJob's runtimePatches times, as Trainer's webhook stamps them); None when
        there is nothing to write (the v1 kinds' spec is the user's alone). ``now`` is
        RFC 3339 at second precision."""
        return None

    def scaled(self, job: J, observed: Observed) -> Scaled | None:
        """The replicas the job's scale subresource moves, counted (None: nothing is
        scaled, or scales are not announced)."""
        return None

    def serving_replica_types(self, job: J) -> tuple[str, ...]:
        """Replica types whose pods never end by themselves (MPI workers serve ``sshd``):
        after a success they are stopped without a grace period."""
        return ()
