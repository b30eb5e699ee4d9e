"""A plan in the making: the job as parsed, its current status, its children, and what the
policies decided so far. The planner hands a :class:`Draft` to each policy in turn and
applies the :class:`~kubetrain.controller.decisions.Decision` it returns; the draft keeps
conditions and their Events together, hands a decision that ends the job to the finish
policy (``policies/finish``) for its consequences, and writes the status only when it
changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubetrain.api.common import (
    ConditionStatus,
    ConditionType,
    JobCondition,
    JobStatus,
    ReplicaStatus,
    RunPolicy,
)
from kubetrain.api.common import JobBase as Job
from kubetrain.controller import conditions as C
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import (
    ConditionChange,
    Context,
    Decision,
    Event,
    Plan,
    soonest,
)
from kubetrain.controller.model import Gate, Observed, RestartVerdict
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.policies import finish


def with_restarts(
    statuses: Mapping[str, ReplicaStatus],
    restarts: Mapping[str, int],
    infrastructure: Mapping[str, int] | None = None,
) -> dict[str, ReplicaStatus]:
    """Replica statuses carrying the persisted restart counts (the program's failures, and
    the infrastructure's)."""
    out = dict(statuses)
    for field, counts in (("restarts", restarts), ("infrastructure_restarts", infrastructure)):
        for rtype, count in (counts or {}).items():
            if count and rtype in out:
                out[rtype] = out[rtype].model_copy(update={field: count})
    return out


def comparable(wire: Mapping[str, Any]) -> dict[str, Any]:
    """A wire status without lastReconcileTime (what decides whether it changed)."""
    out = dict(wire)
    out.pop("lastReconcileTime", None)
    return out


def status_wire(
    raw: Mapping[str, Any],
    plugin: JobPlugin[Any],
    job: Job | None,
    new: JobStatus,
    observed: Observed,
    now: datetime,
) -> dict[str, Any] | None:
    """The wire status to write for ``new``, or None when it says what the job's current
    status says (lastReconcileTime aside)."""
    codec = plugin.status_codec
    wire = codec.write(job, new, observed)
    if comparable(wire) == comparable(codec.normalized(raw.get("status"))):
        return None
    stamped = new.model_copy(update={"last_reconcile_time": C.format_time(now)})
    return codec.write(job, stamped, observed)


class Draft:
    """One reconcile's plan under construction (see the module docs)."""

    def __init__(
        self, raw: Mapping[str, Any], plugin: JobPlugin[Any], observed: Observed, ctx: Context
    ) -> None:
        self.raw = raw
        self.plugin = plugin
        self.ctx = ctx
        self.kind = plugin.kind
        self.name = str((raw.get("metadata") or {}).get("name", ""))
        self.current = plugin.status_codec.read(raw.get("status"))
        self.conditions: list[JobCondition] = list(self.current.conditions or [])
        self.status = self.current.model_copy()
        #: The defaulted job (and what the user chose explicitly, where it matters).
        self.loaded = plugin.load(raw, observed)
        self.job = self.loaded.job
        self.errors = list(self.loaded.errors)
        # The job's Secret is known from its status, not from a cache (the operator
        # cannot read Secrets). It is created before any pod or launcher Job: it surely
        # exists once one of those does; until then it is created again (a 409 is its
        # own: the name comes from the job's uid). A job whose status names none yet has
        # its name derived by the plugin.
        secret = self.current.ssh_auth_secret_name
        exists = secret is not None and bool(observed.pods or observed.batch_jobs)
        self.observed = dataclasses.replace(
            observed,
            secrets={secret: {"metadata": {"name": secret}}} if secret and exists else {},
            ssh_secret_name=secret,
        )
        self.plan = Plan(
            kind=self.kind,
            name=self.name,
            job=self.job,
            seen_restart_counts=dict(ctx.seen_restart_counts),
            seen_scale=dict(ctx.seen_scale),
        )
        #: Set by the policies for the ones after them.
        self.replica_statuses: dict[str, ReplicaStatus] = {}
        self.persisted_restarts: dict[str, int] = {
            rtype: st.restarts
            for rtype, st in (self.current.replica_statuses or {}).items()
            if st.restarts
        }
        self.persisted_infrastructure: dict[str, int] = {
            rtype: st.infrastructure_restarts
            for rtype, st in (self.current.replica_statuses or {}).items()
            if st.infrastructure_restarts
        }
        #: Failed pods already counted in ``restarts`` or ``infrastructureRestarts``, by
        #: replica type (see restart.py).
        self.persisted_counted: dict[str, frozenset[str]] = {
            rtype: frozenset(st.counted_failures)
            for rtype, st in (self.current.replica_statuses or {}).items()
            if st.counted_failures
        }
        self.restart: RestartVerdict | None = None
        #: A node annotation that is invalid (key, value): the job is refused.
        self.node_problem: tuple[str, str] | None = None
        self.gate: Gate | None = None
        #: Set when this reconcile writes only a batch of the children still missing:
        #: (pods there or being created now, pods the job should have).
        self.creating: tuple[int, int] | None = None
        if self.job is not None and not self.finished:
            counted = self.plugin.status(self.job, self.observed).replica_statuses or {}
            self.replica_statuses = with_restarts(
                counted, self.persisted_restarts, self.persisted_infrastructure
            )

    # -- what the policies read ----------------------------------------------------------

    @property
    def finished(self) -> bool:
        """The job had already Succeeded or Failed before this reconcile."""
        return C.finished(self.current) is not None

    @property
    def run_policy(self) -> RunPolicy | None:
        return self.job.run_policy if self.job is not None else None

    def has(self, kind: ConditionType) -> bool:
        """Whether condition ``kind`` is True in the conditions drafted so far."""
        return C.is_true(JobStatus(conditions=self.conditions), kind)

    # -- applying decisions -----------------------------------------------------------------

    def take(self, decision: Decision | None) -> bool:
        """Apply one policy's decision; True when the plan is final."""
        if decision is None:
            return False
        for change in decision.conditions:
            if change.in_place:
                self.conditions = C.set_false(
                    self.conditions, change.type, change.reason, change.message, self.ctx.now
                )
            else:
                self._set(change.type, change.status, change.reason, change.message, change.event)
        self.plan.events.extend(decision.events)
        self.plan.create.extend(decision.create)
        self.plan.apply.extend(decision.apply)
        self.plan.ungate.extend(decision.ungate)
        self.plan.seen_restart_counts.update(decision.seen_restart_counts)
        self.plan.seen_scale.update(decision.seen_scale)
        if decision.awaiting is not None:
            self.plan.awaiting = decision.awaiting
        if decision.replica_statuses is not None:
            self.replica_statuses = dict(decision.replica_statuses)
        self.plan.metrics.extend(decision.metrics)
        self.plan.delete.extend(decision.delete)
        if decision.status:
            self.status = self.status.model_copy(update=decision.status)
        if decision.requeue_after is not None:
            self.plan.requeue_after = soonest(self.plan.requeue_after, decision.requeue_after)
        self.plan.delete_job = self.plan.delete_job or decision.delete_job
        if decision.outcome is not None:
            # The job ends: what follows is the finish policy's (and so is the requeue).
            self.plan.requeue_after = None
            self.take(finish.decide(self, decision.outcome))
            return True
        return decision.final

    def _set(
        self,
        kind: ConditionType,
        status: ConditionStatus,
        reason: str,
        message: str,
        event: str | None,
    ) -> None:
        before = C.get(JobStatus(conditions=self.conditions), kind)
        self.conditions = C.set_condition(
            self.conditions, kind, status, reason, message, self.ctx.now
        )
        changed = before is None or before.status != status or before.reason != reason
        if changed and event:
            self.plan.events.append(Event(event, reason, message))

    def created(self) -> Decision | None:
        """The Created condition (with its Event and metric) on a job's first reconcile."""
        if C.get(JobStatus(conditions=self.conditions), ConditionType.CREATED) is not None:
            return None
        return Decision(
            conditions=[
                ConditionChange(
                    ConditionType.CREATED,
                    ConditionStatus.TRUE,
                    R.lifecycle(self.kind, R.Verb.CREATED),
                    R.created(self.kind, self.name),
                )
            ],
            metrics=["created"],
        )

    def done(self) -> Plan:
        """The plan, with the status only when it changed (lastReconcileTime aside)."""
        new = self.status.model_copy(update={"conditions": self.conditions or None})
        self.plan.status = status_wire(
            self.raw, self.plugin, self.job, new, self.observed, self.ctx.now
        )
        return self.plan
