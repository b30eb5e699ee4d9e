"""The reconcile decision, as one pure function: from a job (as the API server served
it), its plugin, its observed children and the time, what to apply, create and delete,
which status to write, which Events to emit and when to look again.

The order of the steps is the order of precedence: an invalid job fails; a finished job
is only cleaned up (and deleted when its TTL passes); a suspended job has no pods; then
the deadline, the restart model, the framework's success rule and the startup gate can
each end the job; otherwise the desired children are built and the conditions follow
what the pods do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from kubetrain.api import keys as K
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
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.plugins import children
from kubetrain.controller.plugins.base import JobPlugin, Observed, Outcome
from kubetrain.controller.policies import cleanup, deadlines, restart, startup, suspend
from kubetrain.controller.policies.cleanup import ChildRef

#: Children that are created once and never changed (pods and Jobs are immutable where
#: it matters; the SSH Secret must never be regenerated).
CREATE_ONCE = frozenset({"Pod", "Job", "Secret"})
#: Children created under a generated name, and the status field that records it (the
#: operator may create Secrets but not read them: the status is how it knows its own).
GENERATED_NAME_STATUS = {"Secret": "sshAuthSecretName"}
#: Requeue delay after creating a child the startup gate waits for.
IMMEDIATE_REQUEUE_SECONDS = 0.05


@dataclass(frozen=True)
class Event:
    """An Event to emit about the job. ``key`` deduplicates repeats across reconciles."""

    type: str  # Normal | Warning
    reason: str
    message: str
    key: str = ""


@dataclass(frozen=True)
class Context:
    """What the planner needs besides the job and its children."""

    now: datetime
    startup_timeout_seconds: int = 600
    #: uids of failed pods already counted as restarts (deletion may be pending).
    counted_failures: frozenset[str] = frozenset()
    #: In-place restart counts by pod uid, as last seen.
    seen_restart_counts: Mapping[str, int] = field(default_factory=dict)


@dataclass
class Plan:
    """What the reconciler carries out, in this order: create and apply children, write
    the status, delete children, delete the job, emit Events.

    ``create`` holds children not observed yet: they are POSTed, and a name already taken
    by an object the job does not control is a conflict, never adopted. ``apply`` holds
    observed children of this job whose desired content changed (server-side apply).
    ``generate`` holds children created under a generated name, with the status field
    that records the name the API server gave."""

    kind: str
    name: str
    apply: list[dict[str, Any]] = field(default_factory=list)
    create: list[dict[str, Any]] = field(default_factory=list)
    generate: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    delete: list[ChildRef] = field(default_factory=list)
    #: The status to write (wire form), or None when it did not change.
    status: dict[str, Any] | None = None
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    delete_job: bool = False
    counted_failures: frozenset[str] = frozenset()
    seen_restart_counts: dict[str, int] = field(default_factory=dict)
    #: Metric events: created, succeeded, failed, restarted.
    metrics: list[str] = field(default_factory=list)
    #: Children (kind, name) the startup gate waits for: events about them wake the job.
    awaiting: frozenset[tuple[str, str]] = frozenset()
    #: The parsed, defaulted job (None when invalid).
    job: Job | None = None


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


def _min(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _run_policy(job: Job | None) -> RunPolicy | None:
    return job.spec.run_policy if job is not None else None


def startup_timeout(raw: Mapping[str, Any], default: int) -> int:
    """The operator's startup timeout, or the job's annotation when it is a positive int."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(K.STARTUP_TIMEOUT_ANNOTATION)
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return default


class _Builder:
    """Accumulates one plan (keeps the status edits and their Events together)."""

    def __init__(self, raw: Mapping[str, Any], plugin: JobPlugin, ctx: Context) -> None:
        self.raw = raw
        self.plugin = plugin
        self.ctx = ctx
        self.kind = plugin.kind
        meta = raw.get("metadata") or {}
        self.name = str(meta.get("name", ""))
        self.current = parse_status(raw)
        self.conditions: list[JobCondition] = list(self.current.conditions or [])
        self.status = self.current.model_copy()
        self.plan = Plan(
            kind=self.kind,
            name=self.name,
            counted_failures=ctx.counted_failures,
            seen_restart_counts=dict(ctx.seen_restart_counts),
        )

    def set(
        self,
        kind: ConditionType,
        status: ConditionStatus,
        reason: str,
        message: str,
        *,
        event_type: str | None = "Normal",
    ) -> None:
        before = C.get(JobStatus(conditions=self.conditions), kind)
        self.conditions = C.set_condition(
            self.conditions, kind, status, reason, message, self.ctx.now
        )
        after = C.get(JobStatus(conditions=self.conditions), kind)
        changed = before is None or before.status != status or before.reason != reason
        if changed and event_type and after is not None:
            self.plan.events.append(Event(event_type, reason, message))

    def ensure_created(self) -> None:
        if C.get(JobStatus(conditions=self.conditions), ConditionType.CREATED) is None:
            self.set(
                ConditionType.CREATED,
                ConditionStatus.TRUE,
                R.lifecycle(self.kind, R.Verb.CREATED),
                R.created(self.kind, self.name),
            )
            self.plan.metrics.append("created")

    def finish(
        self,
        outcome: Outcome,
        observed: Observed,
        job: Job | None,
        replica_statuses: dict[str, ReplicaStatus] | None,
    ) -> Plan:
        """End the job: the final condition, completionTime, cleanup, the TTL requeue."""
        self.ensure_created()
        failed = outcome.condition is ConditionType.FAILED
        self.set(
            outcome.condition,
            ConditionStatus.TRUE,
            outcome.reason,
            outcome.message,
            event_type="Warning" if failed else "Normal",
        )
        completion = outcome.at or C.format_time(self.ctx.now)
        self.status = self.status.model_copy(
            update={
                "completion_time": completion,
                "replica_statuses": _finished_counts(replica_statuses, succeeded=not failed)
                if replica_statuses is not None
                else self.status.replica_statuses,
            }
        )
        policy = cleanup.clean_pod_policy(_run_policy(job))
        self.plan.delete.extend(cleanup.children_to_delete(policy, observed))
        self.plan.metrics.append("failed" if failed else "succeeded")
        ttl = deadlines.ttl_after_finished(_run_policy(job), self.status, self.ctx.now)
        self.plan.requeue_after = deadlines.SLACK_SECONDS if ttl.due else ttl.after
        return self.done()

    def done(self) -> Plan:
        new = self.status.model_copy(update={"conditions": self.conditions or None})
        if _comparable(new) != _comparable(self.current):
            new = new.model_copy(update={"last_reconcile_time": C.format_time(self.ctx.now)})
            self.plan.status = new.to_wire()
        return self.plan


def _comparable(status: JobStatus) -> dict[str, Any]:
    wire = status.to_wire()
    wire.pop("lastReconcileTime", None)
    return wire


def _finished_counts(
    statuses: dict[str, ReplicaStatus] | None, *, succeeded: bool
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


def _with_restarts(
    statuses: dict[str, ReplicaStatus], restarts: Mapping[str, int]
) -> dict[str, ReplicaStatus]:
    out = dict(statuses)
    for rtype, count in restarts.items():
        if count and rtype in out:
            out[rtype] = out[rtype].model_copy(update={"restarts": count})
    return out


def _persisted_restarts(status: JobStatus) -> dict[str, int]:
    return {
        rtype: st.restarts for rtype, st in (status.replica_statuses or {}).items() if st.restarts
    }


def plan(raw: Mapping[str, Any], plugin: JobPlugin, observed: Observed, ctx: Context) -> Plan:
    """Decide one reconcile of ``raw`` (a job as served, managedBy already checked)."""
    b = _Builder(raw, plugin, ctx)
    job, errors = parse_job(raw, plugin)
    b.plan.job = job
    finished = C.finished(b.current)
    observed = _with_recorded_secret(observed, b.current)

    if job is None:
        if finished:
            return b.done()
        detail = "; ".join(str(e) for e in errors[:10])
        outcome = Outcome(ConditionType.FAILED, R.INVALID_SPEC, R.invalid(detail))
        return b.finish(outcome, observed, None, None)

    run_policy = job.spec.run_policy
    if finished:
        policy = cleanup.clean_pod_policy(run_policy)
        b.plan.delete.extend(cleanup.children_to_delete(policy, observed))
        ttl = deadlines.ttl_after_finished(run_policy, b.current, ctx.now)
        if ttl.due:
            b.plan.delete_job = True
            b.plan.events.append(
                Event("Normal", R.TTL_EXPIRED, f"{b.kind} {b.name} finished and its TTL passed")
            )
        b.plan.requeue_after = ttl.after
        return b.done()

    b.ensure_created()
    replica_statuses = plugin.status(job, observed).replica_statuses or {}
    persisted = _persisted_restarts(b.current)

    if suspend.is_suspended(run_policy):
        b.set(
            ConditionType.SUSPENDED,
            ConditionStatus.TRUE,
            R.lifecycle(b.kind, R.Verb.SUSPENDED),
            R.suspended(b.kind, b.name),
        )
        for kind in (ConditionType.RUNNING, ConditionType.RESTARTING):
            b.conditions = C.set_false(
                b.conditions,
                kind,
                R.lifecycle(b.kind, R.Verb.SUSPENDED),
                R.suspended(b.kind, b.name),
                ctx.now,
            )
        b.plan.delete.extend(suspend.children_to_delete(observed))
        stopped = {rt: st.model_copy(update={"active": 0}) for rt, st in replica_statuses.items()}
        b.status = b.status.model_copy(
            update={"replica_statuses": _with_restarts(stopped, persisted), "start_time": None}
        )
        return b.done()

    if C.is_true(b.current, ConditionType.SUSPENDED):
        b.set(
            ConditionType.SUSPENDED,
            ConditionStatus.FALSE,
            R.lifecycle(b.kind, R.Verb.RESUMED),
            R.resumed(b.kind, b.name),
        )
    start_time = b.current.start_time or C.format_time(ctx.now)
    b.status = b.status.model_copy(update={"start_time": start_time})

    deadline = deadlines.active_deadline(run_policy, b.status, ctx.now)
    if deadline.due:
        seconds = run_policy.active_deadline_seconds if run_policy else 0
        outcome = Outcome(
            ConditionType.FAILED, R.DEADLINE_EXCEEDED, R.deadline_exceeded(seconds or 0)
        )
        return b.finish(outcome, observed, job, _with_restarts(replica_statuses, persisted))

    replicas = plugin.replicas(job)
    verdict = restart.evaluate(
        b.kind,
        replicas,
        observed,
        backoff_limit=run_policy.backoff_limit if run_policy else None,
        restarts=persisted,
        counted=ctx.counted_failures,
        seen_restart_counts=ctx.seen_restart_counts,
        tolerates_failure=lambda r: plugin.tolerates_failure(job, r),
    )
    limit = run_policy.backoff_limit if run_policy else None
    for restarted in verdict.in_place:
        new_restarts = restarted.count - ctx.seen_restart_counts.get(restarted.uid, 0)
        b.plan.seen_restart_counts[restarted.uid] = restarted.count
        b.plan.metrics.extend(["restarted"] * new_restarts)
        cause = restarted.cause.describe() if restarted.cause else "a container restarted"
        reason = restarted.cause.reason if restarted.cause else "BackOff"
        b.plan.events.append(
            Event(
                "Warning",
                reason if reason != "Completed" else R.lifecycle(b.kind, R.Verb.RESTARTING),
                R.restarted_in_place(restarted.pod, cause, verdict.used, limit),
                key=f"restart/{restarted.uid}/{restarted.count}",
            )
        )
    statuses = _with_restarts(replica_statuses, verdict.restarts)
    if verdict.failure is not None:
        return b.finish(verdict.failure, observed, job, statuses)

    verdict_of_framework = plugin.outcome(job, observed)
    if verdict_of_framework is not None:
        return b.finish(verdict_of_framework, observed, job, statuses)

    timeout = startup_timeout(raw, ctx.startup_timeout_seconds)
    gate = startup.evaluate(
        plugin.startup_rules(job),
        observed,
        started_at=C.parse_time(start_time),
        timeout_seconds=timeout,
    )
    if gate.timed_out is not None:
        rule = gate.timed_out
        outcome = Outcome(
            ConditionType.FAILED,
            R.STARTUP_TIMEOUT,
            R.startup_timeout(rule.waiting_label, rule.needed_label, timeout, gate.timeout_detail),
        )
        return b.finish(outcome, observed, job, statuses)

    # Children: recreate nothing that is being deleted; build the rest.
    recreating = {r.replica.pod_name for r in verdict.recreate}
    for item in verdict.recreate:
        pod = observed.pods[item.replica.pod_name]
        b.plan.delete.append(cleanup.ref("Pod", pod))
        if item.counted_now:
            b.plan.metrics.append("restarted")
            b.plan.events.append(
                Event(
                    "Warning",
                    item.cause.reason or R.lifecycle(b.kind, R.Verb.RESTARTING),
                    R.restarting(item.replica.pod_name, item.cause.describe(), verdict.used, limit),
                    key=f"recreate/{item.uid}",
                )
            )
    b.plan.counted_failures = frozenset(
        {u for u in ctx.counted_failures if u in {podstate.uid(p) for p in observed.pods.values()}}
        | {r.uid for r in verdict.recreate}
    )
    for desired in plugin.build(job, observed):
        kind = desired["kind"]
        name = desired["metadata"].get("name")
        if not name:
            b.plan.generate.append((desired, GENERATED_NAME_STATUS[kind]))
            continue
        present = observed.by_kind(kind).get(name)
        if present is None:
            if name not in recreating:
                b.plan.create.append(desired)
        elif kind not in CREATE_ONCE and (
            children.observed_hash(present) != children.observed_hash(desired)
        ):
            b.plan.apply.append(desired)
    b.plan.delete.extend(_surplus(job, plugin, observed))

    # Conditions follow the pods.
    messages = _problems(observed)
    for pod_name, problem, uid in messages:
        b.plan.events.append(
            Event(
                "Warning",
                problem.reason,
                problem.describe(pod_name),
                key=f"problem/{uid}/{problem.reason}",
            )
        )
    problem_text = "; ".join(p.describe(n) for n, p, _ in messages[:3])
    if verdict.recreate:
        first = verdict.recreate[0]
        b.set(
            ConditionType.RESTARTING,
            ConditionStatus.TRUE,
            R.lifecycle(b.kind, R.Verb.RESTARTING),
            R.restarting(first.replica.pod_name, first.cause.describe(), verdict.used, limit),
            event_type=None,
        )
    elif plugin.is_running(job, observed):
        base = R.running(b.kind, b.name)
        b.set(
            ConditionType.RUNNING,
            ConditionStatus.TRUE,
            R.lifecycle(b.kind, R.Verb.RUNNING),
            f"{base} {problem_text}".strip(),
        )
    else:
        base = R.created(b.kind, b.name)
        waiting = "; ".join(
            R.startup_waiting(r.waiting_label, r.needed_label) for r in gate.waiting
        )
        for rule in gate.waiting:
            b.plan.events.append(
                Event(
                    "Normal",
                    R.STARTUP_WAITING,
                    R.startup_waiting(rule.waiting_label, rule.needed_label),
                    key=f"waiting/{start_time}/{','.join(rule.waiting)}",
                )
            )
        if not C.is_true(
            JobStatus(conditions=b.conditions), ConditionType.RUNNING
        ) and not C.is_true(JobStatus(conditions=b.conditions), ConditionType.RESTARTING):
            text = " ".join(t for t in (base, waiting, problem_text) if t)
            b.set(
                ConditionType.CREATED,
                ConditionStatus.TRUE,
                R.lifecycle(b.kind, R.Verb.CREATED),
                text,
                event_type=None,
            )
    b.status = b.status.model_copy(update={"replica_statuses": statuses})
    b.plan.requeue_after = _min(deadline.after, gate.requeue_after)
    b.plan.awaiting = frozenset(
        {("Pod", name) for rule in gate.waiting for name in rule.needed_pods}
        | {("Service", name) for rule in gate.waiting for name in rule.needed_services}
    )
    written = {(o["kind"], o["metadata"]["name"]) for o in (*b.plan.create, *b.plan.apply)}
    if written & b.plan.awaiting:
        # The gate was evaluated before this reconcile created what it waits for: look
        # again as soon as the write is in the cache (the Service may be all it lacked).
        b.plan.requeue_after = _min(b.plan.requeue_after, IMMEDIATE_REQUEUE_SECONDS)
    return b.done()


def _with_recorded_secret(observed: Observed, status: JobStatus) -> Observed:
    """The job's generated Secret is known from its status, not from a cache."""
    name = status.ssh_auth_secret_name
    secrets = {name: {"metadata": {"name": name}}} if name else {}
    return dataclasses.replace(observed, secrets=secrets)


def _problems(observed: Observed) -> list[tuple[str, podstate.Problem, str]]:
    out = []
    for name, pod in sorted(observed.pods.items()):
        if not podstate.is_active(pod):
            continue
        found = podstate.problems(pod)
        if found:
            out.append((name, found[0], podstate.uid(pod)))
    return out


def _surplus(job: Job, plugin: JobPlugin, observed: Observed) -> list[ChildRef]:
    """Per-replica pods and Services no replica needs any more (scaled down or a replica
    type removed)."""
    wanted = {r.pod_name for r in plugin.replicas(job)}
    out: list[ChildRef] = []
    for kind in ("Pod", "Service"):
        for name, obj in sorted(observed.by_kind(kind).items()):
            obj_labels = (obj.get("metadata") or {}).get("labels") or {}
            if K.REPLICA_INDEX not in obj_labels or obj_labels.get(K.JOB_ROLE) == "launcher":
                continue
            if name not in wanted and not podstate.is_deleting(obj):
                out.append(cleanup.ref(kind, obj))
    return out


def plan_failure(
    raw: Mapping[str, Any], plugin: JobPlugin, observed: Observed, ctx: Context, outcome: Outcome
) -> Plan:
    """A plan that ends the job with ``outcome`` (e.g. the API server rejected a child)."""
    b = _Builder(raw, plugin, ctx)
    job, _errors = parse_job(raw, plugin)
    b.plan.job = job
    if C.finished(b.current):
        return b.done()
    observed = _with_recorded_secret(observed, b.current)
    statuses = plugin.status(job, observed).replica_statuses if job is not None else None
    return b.finish(outcome, observed, job, statuses)


def _status_of(raw: Mapping[str, Any], plan: Plan) -> JobStatus:
    """The status a plan writes, or the job's current one when it writes none."""
    if plan.status is not None:
        return JobStatus.model_validate(plan.status)
    return parse_status(raw)


def _with_status(raw: Mapping[str, Any], plan: Plan, new: JobStatus, ctx: Context) -> Plan:
    current = parse_status(raw)
    if _comparable(new) != _comparable(current):
        new = new.model_copy(update={"last_reconcile_time": C.format_time(ctx.now)})
        plan.status = new.to_wire()
    return plan


def with_blocked_child(
    raw: Mapping[str, Any], plan: Plan, ctx: Context, reason: str, message: str
) -> Plan:
    """``plan`` after its child writes failed for a reason the job must show: the job's
    current state (Created, Running or Restarting) takes ``reason`` and ``message``, and
    a Warning Event says the same. Deletions, other Events and counters stand."""
    status = _status_of(raw, plan)
    conditions = list(status.conditions or [])
    live = (ConditionType.CREATED, ConditionType.RUNNING, ConditionType.RESTARTING)
    current = next(
        (c for c in reversed(conditions) if c.type in live and c.status == ConditionStatus.TRUE),
        None,
    )
    kind = current.type if current is not None else ConditionType.CREATED
    conditions = C.set_condition(conditions, kind, ConditionStatus.TRUE, reason, message, ctx.now)
    plan = _with_status(raw, plan, status.model_copy(update={"conditions": conditions}), ctx)
    plan.apply, plan.create, plan.generate = [], [], []
    plan.events.append(Event("Warning", reason, message, key=f"blocked/{message}"))
    return plan


def record_generated(
    raw: Mapping[str, Any], plan: Plan, ctx: Context, named: Mapping[str, str]
) -> Plan:
    """``plan`` with the names of the children created under generated names written
    into the status fields that record them."""
    status = _status_of(raw, plan)
    wire = status.to_wire()
    wire.update(named)
    return _with_status(raw, plan, JobStatus.model_validate(wire), ctx)
