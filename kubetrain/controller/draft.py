"""A plan in the making: the job as parsed, its current status, its children, and what the
policies decided so far. The planner hands a :class:`Draft` to each policy in turn and
applies the :class:`~kubetrain.controller.decisions.Decision` it returns; the draft keeps
conditions and their Events together, and writes the status only when it changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from kubetrain.api.common import (
    ConditionStatus,
    ConditionType,
    JobCondition,
    JobStatus,
    ReplicaStatus,
    RunPolicy,
)
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.loader import Job, load_job
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
from kubetrain.controller.plugins.base import JobPlugin, Observed
from kubetrain.controller.policies import cleanup, deadlines
from kubetrain.controller.policies.restart import RestartVerdict
from kubetrain.controller.policies.startup import Gate


def parse_status(raw: Mapping[str, Any]) -> JobStatus:
    """The job's current status; an unreadable one counts as empty."""
    try:
        return JobStatus.model_validate(raw.get("status") or {})
    except ValidationError:
        return JobStatus()


def parse_job(raw: Mapping[str, Any], plugin: JobPlugin) -> tuple[Job | None, list[FieldError]]:
    """The defaulted job, or the problems that make it invalid."""
    body = {k: v for k, v in raw.items() if k != "status"}
    meta = dict(body.get("metadata") or {})
    meta.pop("managedFields", None)
    body["metadata"] = meta
    try:
        job = apply_defaults(load_job(body))
    except JobValidationError as err:
        return None, list(err.errors)
    errors = plugin.validate(job)
    return (None, errors) if errors else (job, [])


def with_restarts(
    statuses: Mapping[str, ReplicaStatus], restarts: Mapping[str, int]
) -> dict[str, ReplicaStatus]:
    """Replica statuses carrying the persisted restart counts."""
    out = dict(statuses)
    for rtype, count in restarts.items():
        if count and rtype in out:
            out[rtype] = out[rtype].model_copy(update={"restarts": count})
    return out


def _finished_counts(
    statuses: Mapping[str, ReplicaStatus] | None, *, succeeded: bool
) -> dict[str, ReplicaStatus] | None:
    """Counts at the end: active pods are being stopped, so they count as succeeded on
    success (upstream moves them the same way) and no longer as active."""
    if statuses is None:
        return None
    out = {}
    for rtype, st in statuses.items():
        active = st.active or 0
        update: dict[str, Any] = {"active": 0}
        if succeeded and active:
            update["succeeded"] = (st.succeeded or 0) + active
        out[rtype] = st.model_copy(update=update)
    return out


def comparable(status: JobStatus) -> dict[str, Any]:
    """A status without lastReconcileTime (what decides whether it changed)."""
    wire = status.to_wire()
    wire.pop("lastReconcileTime", None)
    return wire


class Draft:
    """One reconcile's plan under construction (see the module docs)."""

    def __init__(
        self, raw: Mapping[str, Any], plugin: JobPlugin, observed: Observed, ctx: Context
    ) -> None:
        self.raw = raw
        self.plugin = plugin
        self.ctx = ctx
        self.kind = plugin.kind
        self.name = str((raw.get("metadata") or {}).get("name", ""))
        self.current = parse_status(raw)
        self.conditions: list[JobCondition] = list(self.current.conditions or [])
        self.status = self.current.model_copy()
        self.job, self.errors = parse_job(raw, plugin)
        # The job's generated Secret is known from its status, not from a cache.
        secret = self.current.ssh_auth_secret_name
        self.observed = dataclasses.replace(
            observed, secrets={secret: {"metadata": {"name": secret}}} if secret else {}
        )
        self.plan = Plan(
            kind=self.kind,
            name=self.name,
            job=self.job,
            counted_failures=ctx.counted_failures,
            seen_restart_counts=dict(ctx.seen_restart_counts),
        )
        #: Set by the policies for the ones after them.
        self.replica_statuses: dict[str, ReplicaStatus] = {}
        self.persisted_restarts: dict[str, int] = {
            rtype: st.restarts
            for rtype, st in (self.current.replica_statuses or {}).items()
            if st.restarts
        }
        self.restart: RestartVerdict | None = None
        self.gate: Gate | None = None
        if self.job is not None and not self.finished:
            counted = self.plugin.status(self.job, self.observed).replica_statuses or {}
            self.replica_statuses = with_restarts(counted, self.persisted_restarts)

    # -- what the policies read ----------------------------------------------------------

    @property
    def finished(self) -> bool:
        """The job had already Succeeded or Failed before this reconcile."""
        return C.finished(self.current) is not None

    @property
    def run_policy(self) -> RunPolicy | None:
        return self.job.spec.run_policy if self.job is not None else None

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
        self.plan.generate.extend(decision.generate)
        self.plan.seen_restart_counts.update(decision.seen_restart_counts)
        if decision.counted_failures is not None:
            self.plan.counted_failures = decision.counted_failures
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
            self._finish(decision)
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

    def ensure_created(self) -> None:
        self.take(self.created())

    def _finish(self, decision: Decision) -> None:
        """End the job: the final condition, completionTime, cleanup, the TTL requeue."""
        outcome = decision.outcome
        assert outcome is not None
        self.ensure_created()
        failed = outcome.condition is ConditionType.FAILED
        self._set(
            outcome.condition,
            ConditionStatus.TRUE,
            outcome.reason,
            outcome.message,
            "Warning" if failed else "Normal",
        )
        statuses = self.status.replica_statuses if self.job is None else self.replica_statuses
        self.status = self.status.model_copy(
            update={
                "completion_time": outcome.at or C.format_time(self.ctx.now),
                "replica_statuses": _finished_counts(statuses, succeeded=not failed)
                if self.job is not None
                else statuses,
            }
        )
        policy = cleanup.clean_pod_policy(self.run_policy)
        self.plan.delete.extend(cleanup.children_to_delete(policy, self.observed))
        self.plan.metrics.append("failed" if failed else "succeeded")
        ttl = deadlines.ttl_after_finished(self.run_policy, self.status, self.ctx.now)
        self.plan.requeue_after = deadlines.SLACK_SECONDS if ttl.due else ttl.after

    def done(self) -> Plan:
        """The plan, with the status only when it changed (lastReconcileTime aside)."""
        new = self.status.model_copy(update={"conditions": self.conditions or None})
        if comparable(new) != comparable(self.current):
            new = new.model_copy(update={"last_reconcile_time": C.format_time(self.ctx.now)})
            self.plan.status = new.to_wire()
        return self.plan
