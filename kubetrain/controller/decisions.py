"""The small types the planner and the policies share.

A policy looks at a job being reconciled (a :class:`~kubetrain.controller.draft.Draft`)
and returns a :class:`Decision`: the conditions it sets, the Events and metric increments
that go with them, the children it deletes, status fields it changes, when to look again,
and whether it ends the job (an outcome) or the reconcile (``final``). The planner applies
the decisions in its order of precedence and hands the reconciler a :class:`Plan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api.common import ConditionStatus, ConditionType
from kubetrain.api.common import JobBase as Job
from kubetrain.controller import podstate
from kubetrain.controller.model import Outcome
from kubetrain.controller.node_rules import NodeRules

#: Children the operator cannot read (Secrets), and the status field that records the
#: name it gave them. The name is derived from the job's uid (``sshkeys.ssh_secret_name``),
#: so every pass and every operator after a crash computes the same one: a 409 on create
#: can only be its own earlier create whose answer was lost, and no second one is made.
#: They are created before any other child, alone, in the job's first reconcile, and the
#: name is recorded with that reconcile's status (jobs whose status already names one, as
#: an earlier operator chose at random, keep it).
NAMED_IN_STATUS = {"Secret": "ssh_auth_secret_name"}


#: A Decision's metric event for a restart after an infrastructure failure:
#: ``infrastructure/<the pod's reason>`` (the others: ``created``, ``restarted``).
INFRASTRUCTURE_METRIC = "infrastructure/"
#: A hang restart's metric event: ``hang/<reason>`` (``policies/hang``).
HANG_METRIC = "hang/"


@dataclass(frozen=True)
class ChildRef:
    """A child to delete, with the uid it must still have (a precondition)."""

    kind: str
    name: str
    uid: str
    deleting: bool = False
    #: Delete at once (grace period 0): a pod on a node that cannot confirm its end.
    force: bool = False
    #: The grace period to delete with (None: the pod's own).
    grace: int | None = None

    @property
    def delete_grace(self) -> int | None:
        """The grace period of the delete request (None: the object's own)."""
        return 0 if self.force else self.grace


def ref(kind: str, obj: Mapping[str, Any]) -> ChildRef:
    """A ChildRef for ``obj`` (its name, uid and whether it is being deleted)."""
    return ChildRef(kind, podstate.name(obj), podstate.uid(obj), podstate.is_deleting(obj))


@dataclass(frozen=True)
class Event:
    """An Event to emit about the job. ``key`` deduplicates repeats across reconciles;
    ``name`` (a DNS suffix) makes it the job's only Event of that name, ever."""

    type: str  # Normal | Warning
    reason: str
    message: str
    key: str = ""
    name: str = ""


@dataclass(frozen=True)
class Context:
    """What the planner needs besides the job and its children."""

    now: datetime
    startup_timeout_seconds: int = 600
    #: How long ranks may run on after a success (``cleanPodPolicy`` unset).
    success_grace_seconds: int = 60
    #: In-place restart counts by pod uid, as last seen.
    seen_restart_counts: Mapping[str, int] = field(default_factory=dict)
    #: The scaled replica type's count, as last reconciled (``policies/scaling``).
    seen_scale: Mapping[str, int] = field(default_factory=dict)
    #: The operator's rules for lost and unhealthy nodes (``node_health``).
    node_rules: NodeRules = field(default_factory=NodeRules)
    #: Hang detection's cluster defaults (``policies/hang``; 0: off).
    progress_timeout_seconds: int = 0
    progress_startup_timeout_seconds: int = 0


@dataclass(frozen=True)
class ConditionChange:
    """Set condition ``type`` to ``status``; a change of status or reason is a transition
    and emits an Event of type ``event`` (None: no Event). ``in_place`` turns an existing
    condition False without a transition (Running when the job is suspended)."""

    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str
    event: str | None = "Normal"
    in_place: bool = False


@dataclass
class Decision:
    """What one policy decided (everything optional)."""

    conditions: list[ConditionChange] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    #: Metric events: created, succeeded, failed, restarted, infrastructure/<cause>.
    metrics: list[str] = field(default_factory=list)
    delete: list[ChildRef] = field(default_factory=list)
    #: Typed status fields to set (``start_time``, ``replica_statuses``, ...).
    status: dict[str, Any] = field(default_factory=dict)
    #: Look again this many seconds from now.
    requeue_after: float | None = None
    #: The job ends with this outcome (``policies/finish`` adds its consequences:
    #: completionTime, cleanup, the TTL).
    outcome: Outcome | None = None
    #: Nothing after this decision applies in this reconcile.
    final: bool = False
    #: Delete the job itself (its TTL passed).
    delete_job: bool = False
    #: The replica counts the status reports (and a final state starts from).
    replica_statuses: dict[str, Any] | None = None
    #: Children to create or apply (see :class:`Plan`).
    create: list[dict[str, Any]] = field(default_factory=list)
    apply: list[dict[str, Any]] = field(default_factory=list)
    #: Pods whose ``kubetrain.dev/startup`` scheduling gate is lifted.
    ungate: list[ChildRef] = field(default_factory=list)
    #: Children (kind, name) the startup gate waits for.
    awaiting: frozenset[tuple[str, str]] | None = None
    #: What the reconciler remembers: the in-place restart counts seen.
    seen_restart_counts: dict[str, int] = field(default_factory=dict)
    #: ... and the scaled replica count reconciled (``policies/scaling``).
    seen_scale: dict[str, int] = field(default_factory=dict)


@dataclass
class Plan:
    """What the reconciler carries out, in this order: create and apply children, lift
    startup gates, write the status, delete children, delete the job, emit Events.

    ``create`` holds children not observed yet: they are POSTed, and a name already taken
    by an object the job does not control is a conflict, never adopted. ``apply`` holds
    observed children of this job whose desired content changed (server-side apply). The
    SSH Secret is created before the others, alone: nothing that mounts it is created if
    it could not be."""

    kind: str
    name: str
    apply: list[dict[str, Any]] = field(default_factory=list)
    create: list[dict[str, Any]] = field(default_factory=list)
    ungate: list[ChildRef] = field(default_factory=list)
    delete: list[ChildRef] = field(default_factory=list)
    #: The status to write (wire form), or None when it did not change.
    status: dict[str, Any] | None = None
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    delete_job: bool = False
    seen_restart_counts: dict[str, int] = field(default_factory=dict)
    seen_scale: dict[str, int] = field(default_factory=dict)
    #: Metric events: created, succeeded, failed, restarted, infrastructure/<cause>.
    metrics: list[str] = field(default_factory=list)
    #: Children (kind, name) the startup gate waits for: events about them wake the job.
    awaiting: frozenset[tuple[str, str]] = frozenset()
    #: The parsed, defaulted job (None when invalid).
    job: Job | None = None


def soonest(*values: float | None) -> float | None:
    """The smallest of the delays given (None when none is)."""
    present = [v for v in values if v is not None]
    return min(present) if present else None
