"""Carries out one reconcile: read the job from the cache, decide with the pure
``planner``, then apply and create children, write the status (once, only when it
changed), delete children, and emit Events after the status write.

It talks to the cluster only through ``JobCache`` and ``ClusterWriter``: the same code
runs against the informer-backed ``KubeCluster`` and the unit tests' in-memory cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.common import ConditionType
from kubetrain.api.kinds import kind_info
from kubetrain.controller import child_events, planner
from kubetrain.controller import conditions as C
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import NAMED_IN_STATUS, Context, Event, Plan
from kubetrain.controller.errors import (
    ApiError,
    ChildConflict,
    ErrorClass,
    RefusalKind,
    classify,
    refusal_of,
)
from kubetrain.controller.memory import JobMemory
from kubetrain.controller.metrics import Metrics
from kubetrain.controller.model import Observed, Outcome
from kubetrain.controller.node_rules import NodeRules
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.policies import managed_by
from kubetrain.controller.ports import ClusterWriter, JobCache, JobKey
from kubetrain.controller.runtimes import RUNTIME_KINDS, guard_runtime

log = logging.getLogger("kubetrain.reconciler")


@dataclass(frozen=True)
class Result:
    """``requeue_after``: look again in that many seconds (deadline, TTL, gate)."""

    requeue_after: float | None = None
    error: ErrorClass | None = None


class Reconciler:
    """Reconciles jobs by key; safe to call from several worker threads (never for the
    same key at once: the work queue guarantees it)."""

    def __init__(
        self,
        cache: JobCache,
        writer: ClusterWriter,
        plugins: Mapping[str, JobPlugin[Any]],
        *,
        metrics: Metrics | None = None,
        startup_timeout_seconds: int = 600,
        success_grace_seconds: int = 60,
        progress_timeouts: tuple[int, int] = (0, 0),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        executor: Executor | None = None,
        refusal_limit: int = 5,
        refusal_backoff_seconds: float = 2.0,
        node_rules: NodeRules | None = None,
    ) -> None:
        self.cache = cache
        self.writer = writer
        self.plugins = plugins
        self.metrics = metrics or Metrics()
        #: Every reconcile's context but the time and the job's memory.
        self.settings = Context(
            now=clock(),
            startup_timeout_seconds=startup_timeout_seconds,
            success_grace_seconds=success_grace_seconds,
            node_rules=node_rules or NodeRules(),
            progress_timeout_seconds=progress_timeouts[0],
            progress_startup_timeout_seconds=progress_timeouts[1],
        )
        self.clock = clock
        #: Runs a plan's child writes concurrently (None: one after the other).
        self.executor = executor
        #: Reconciles in a row whose children admission policy refused before the job
        #: fails (``ChildRefused``); quota and RBAC refusals are retried without limit.
        self.refusal_limit = refusal_limit
        #: First wait after a refusal; it doubles with each one, up to a minute.
        self.refusal_backoff_seconds = refusal_backoff_seconds
        self._memory: dict[JobKey, JobMemory] = {}
        self._lock = threading.Lock()

    def memory(self, key: JobKey, uid: str) -> JobMemory:
        """The memory of job ``key``; a new job of the same name starts afresh."""
        with self._lock:
            current = self._memory.get(key)
            if current is None or current.uid != uid:
                current = self._memory[key] = JobMemory(uid=uid)
            return current

    def forget(self, key: JobKey) -> None:
        """Drop what is remembered about job ``key`` (it is gone)."""
        with self._lock:
            self._memory.pop(key, None)

    def remembered(self) -> int:
        """How many jobs the reconciler holds memory for (bounded by live jobs)."""
        with self._lock:
            return len(self._memory)

    def reconcile(self, key: JobKey) -> Result:
        """Reconcile one job; raises ApiError for the caller's retry policy."""
        kind, _namespace, _name = key
        started = time.perf_counter()
        outcome = "ok"
        try:
            result = self._reconcile(key)
            if result.requeue_after is not None:
                outcome = "requeue"
            return result
        except Exception as err:
            outcome = "error"
            self.metrics.reconcile_errors.labels(kind=kind, error=classify(err).value).inc()
            raise
        finally:
            self.metrics.reconcile_duration.labels(kind=kind, result=outcome).observe(
                time.perf_counter() - started
            )

    def _reconcile_runtime(self, key: JobKey) -> Result:
        """A runtime's in-use annotation follows the TrainJobs that name it."""
        runtime = self.cache.runtime(key)
        if runtime is None:
            self.forget(key)
            return Result()
        guard_runtime(key, runtime, self.cache.runtime_users(key), self.writer)
        return Result()

    def _reconcile(self, key: JobKey) -> Result:
        kind, _namespace, _name = key
        if kind in RUNTIME_KINDS:
            return self._reconcile_runtime(key)
        raw = self.cache.job(key)
        if raw is None:
            self.forget(key)
            return Result()
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if meta.get("deletionTimestamp"):
            self.forget(key)
            return Result()
        memory = self.memory(key, uid)
        if not managed_by.is_ours(raw):
            self._left_alone(key, raw, memory)
            return Result()
        plugin = self.plugins[kind]
        now = self.clock()
        stamped = self._stamp(key, plugin, raw, now)
        if stamped is None:
            return Result()
        raw = stamped
        observed = self.cache.observed(key, uid, now)
        ctx = dataclasses.replace(
            self.settings,
            now=now,
            seen_restart_counts=dict(memory.seen_restart_counts),
            seen_scale=dict(memory.seen_scale),
        )
        plan = planner.plan(raw, plugin, observed, ctx)
        try:
            created = self._write_children(plan)
        except ChildConflict as conflict:
            plan = self._after_conflict(raw, plugin, observed, ctx, plan, conflict)
        except ApiError as err:
            plan = self._after_refusal(raw, plugin, observed, ctx, plan, memory, err)
        else:
            memory.refusals = 0
            job_created = R.lifecycle(kind, R.Verb.CREATED)
            plan.events, folded = child_events.announce(plan.events, created, job_created)
            for folded_key in folded:
                memory.remember_event(folded_key)
            for pod in plan.ungate:
                self.writer.ungate(key[1], pod, K.STARTUP_GATE)
        exits, memory.exited = child_events.exited(
            list(observed.pods.values()), kind_info(kind).main_container, memory.exited
        )
        plan.events.extend(exits)
        self._finish(key, raw, plan, memory)
        self.cache.set_awaited(key, plan.awaiting)
        return Result(requeue_after=plan.requeue_after)

    def _stamp(
        self, key: JobKey, plugin: JobPlugin[Any], raw: dict[str, Any], now: datetime
    ) -> dict[str, Any] | None:
        """The job after the plugin's own write to it (``spec_stamp``), or None when it is
        gone. A refusal (422) is logged and the job reconciled as it is; a conflict is
        raised (the newer version comes with the next watch event)."""
        ops = plugin.spec_stamp(raw, C.format_time(now))
        if ops is None:
            return raw
        try:
            return self.writer.patch_job(key, ops)
        except ApiError as err:
            if err.status == 404:
                return None
            if err.status != 422:
                raise
            log.warning(
                "the API server refused the operator's own change to the job",
                extra={"job": f"{key[0]}/{key[1]}/{key[2]}", "error": str(err)},
            )
            return raw

    def _left_alone(self, key: JobKey, raw: Mapping[str, Any], memory: JobMemory) -> None:
        """A job another controller manages: say so once (a log line per process, one
        Event per job, ever), and touch nothing else."""
        if not memory.remember_event("managed-elsewhere"):
            return
        kind, namespace, name = key
        controller = managed_by.managed_by(raw) or ""
        log.info(
            "left to another controller",
            extra={"job": f"{kind}/{namespace}/{name}", "managed_by": controller},
        )
        self.writer.emit_event(
            raw,
            Event(
                "Normal",
                R.MANAGED_ELSEWHERE,
                R.managed_elsewhere(kind, name, controller),
                name="managed-elsewhere",
            ),
        )

    def _after_conflict(
        self,
        raw: Mapping[str, Any],
        plugin: JobPlugin[Any],
        observed: Observed,
        ctx: Context,
        plan: Plan,
        conflict: ChildConflict,
    ) -> Plan:
        """A child's name is taken: wait for a predecessor's garbage collection, else
        fail the job and leave the object alone."""
        c = conflict
        if c.predecessor:
            message = R.waiting_for_predecessor(c.kind, c.namespace, c.name, c.holder)
            blocked = planner.with_blocked_child(
                raw, plugin, observed, plan, ctx, R.CHILD_NAME_CONFLICT, message
            )
            blocked.requeue_after = 2.0
            return blocked
        message = R.child_name_conflict(c.kind, c.namespace, c.name, c.holder)
        outcome = Outcome(ConditionType.FAILED, R.CHILD_NAME_CONFLICT, message)
        return planner.plan_failure(raw, plugin, observed, ctx, outcome)

    def _after_refusal(
        self,
        raw: Mapping[str, Any],
        plugin: JobPlugin[Any],
        observed: Observed,
        ctx: Context,
        plan: Plan,
        memory: JobMemory,
        err: ApiError,
    ) -> Plan:
        """The API server refused a child: say so on the job at once; fail it when the
        refusal cannot change without a spec change. Other errors are raised."""
        refusal = refusal_of(err)
        what = err.subject or err.call
        if refusal is None:
            if err.error_class is not ErrorClass.PERMANENT:
                raise err
            # The API server rejected a child built from the job: the job is invalid.
            rejected = Outcome(
                ConditionType.FAILED, R.INVALID_SPEC, R.invalid(f"{what}: {err.message}")
            )
            return planner.plan_failure(raw, plugin, observed, ctx, rejected)
        memory.refusals += 1
        message = R.child_refused(
            what, refusal.value, err.message, memory.refusals, self.refusal_limit
        )
        log.warning(
            "child refused",
            extra={"job": plan.name, "child": what, "refusal": refusal.value, "error": err.message},
        )
        if refusal is RefusalKind.POLICY and memory.refusals >= self.refusal_limit:
            failed = Outcome(ConditionType.FAILED, R.CHILD_REFUSED, message)
            return planner.plan_failure(raw, plugin, observed, ctx, failed)
        blocked = planner.with_blocked_child(
            raw, plugin, observed, plan, ctx, R.CHILD_REFUSED, message
        )
        blocked.requeue_after = min(self.refusal_backoff_seconds * 2 ** (memory.refusals - 1), 60.0)
        return blocked

    def _write_children(self, plan: Plan) -> list[dict[str, Any]]:
        """Create and apply the plan's children: the SSH Secret first and alone (what
        mounts it is not created unless it could be), then the rest in parallel (they are
        independent); the first error (conflicts, then permanent ones first) is raised
        after all calls returned. Returns the children this reconcile created (not those
        a create found already there, made by an earlier pass)."""
        created: set[int] = set()

        def create(obj: dict[str, Any]) -> None:
            with _naming(obj):
                if self.writer.create(obj):
                    created.add(id(obj))  # set.add is atomic across the pool's threads

        def apply(obj: dict[str, Any]) -> None:
            with _naming(obj):
                self.writer.apply(obj)

        first = [obj for obj in plan.create if obj["kind"] in NAMED_IN_STATUS]
        for obj in first:
            create(obj)
        calls: list[Callable[[], None]] = [
            *(functools.partial(create, obj) for obj in plan.create if obj not in first),
            *(functools.partial(apply, obj) for obj in plan.apply),
        ]
        if len(calls) <= 1 or self.executor is None:
            for call in calls:
                call()
            return [obj for obj in plan.create if id(obj) in created]
        errors: list[Exception] = []
        for future in [self.executor.submit(call) for call in calls]:
            error = future.exception()
            if isinstance(error, ApiError | ChildConflict):
                errors.append(error)
            elif error is not None:
                raise error
        if errors:
            errors.sort(key=_error_rank)
            raise errors[0]
        return [obj for obj in plan.create if id(obj) in created]

    def _finish(self, key: JobKey, raw: Mapping[str, Any], plan: Plan, memory: JobMemory) -> None:
        kind, namespace, _name = key
        if plan.status is not None:
            try:
                self.writer.write_status(key, raw, plan.status)
            except ApiError as err:
                if err.status == 404:
                    return
                raise
            self._observe_transition(kind, raw, plan.status)
        memory.seen_restart_counts = plan.seen_restart_counts
        memory.seen_scale = plan.seen_scale
        for ref in plan.delete:
            self.writer.delete(namespace, ref)
        if plan.delete_job:
            self.writer.delete_job(key, str((raw.get("metadata") or {}).get("uid") or ""))
        for event in plan.events:
            if event.key and not memory.remember_event(event.key):
                continue
            self.writer.emit_event(raw, event)
        for name in plan.metrics:
            self.metrics.count(name, kind, namespace)
        if plan.status is not None or plan.apply or plan.delete:
            log.info(
                "reconciled",
                extra={
                    "job": f"{kind}/{key[1]}/{key[2]}",
                    "applied": len(plan.apply) + len(plan.create),
                    "deleted": len(plan.delete),
                    "state": _state(plan.status),
                },
            )

    def _observe_transition(self, kind: str, raw: Mapping[str, Any], wire: Any) -> None:
        """The job metrics of a status change: time to Running when the job starts (or
        resumes), its duration and result when it ends."""
        codec = self.plugins[kind].status_codec
        before, after = codec.read(raw.get("status")), codec.read(wire)
        meta = raw.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        created = C.parse_time(meta.get("creationTimestamp"))
        result = C.finished(after)
        if result is not None and C.finished(before) is None:
            condition = C.get(after, result)
            end = C.parse_time(after.completion_time) or self.clock()
            self.metrics.finished(
                kind,
                namespace,
                result.value,
                (condition.reason if condition else None) or "",
                (end - created).total_seconds() if created is not None else None,
            )
            return
        started = C.is_true(after, ConditionType.RUNNING)
        if started and not C.is_true(before, ConditionType.RUNNING):
            if C.is_true(before, ConditionType.RESTARTING):
                return  # back from a restart: the job had started already
            since = C.waiting_since(after, created)
            if since is not None:
                seconds = max(0.0, (self.clock() - since).total_seconds())
                self.metrics.time_to_running.labels(kind=kind).observe(seconds)


@contextlib.contextmanager
def _naming(obj: Mapping[str, Any]) -> Iterator[None]:
    """Name the child being written in an ApiError raised while writing it."""
    try:
        yield
    except ApiError as err:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or f"{meta.get('generateName', '')}<generated>"
        err.subject = f"{obj.get('kind')} {meta.get('namespace')}/{name}"
        raise


def _error_rank(error: Exception) -> int:
    """Which of several write errors to report: conflicts, refusals, invalid, others."""
    if isinstance(error, ChildConflict):
        return 0
    if isinstance(error, ApiError) and refusal_of(error) is not None:
        return 1
    if isinstance(error, ApiError) and error.error_class is ErrorClass.PERMANENT:
        return 2
    return 3


def _state(status: Mapping[str, Any] | None) -> str | None:
    conditions = (status or {}).get("conditions") or []
    return str(conditions[-1].get("type")) if conditions else None
