"""The children a job should have now, against those it has: what to create (not seen
yet; pods of replicas being recreated wait until the old pod is gone), what to apply
again (a child of this job whose desired content changed), the name of a child the
operator cannot read back (the SSH Secret), and the per-replica pods and Services no
replica needs any more. A
Service or pod the startup gate waits for that this reconcile creates makes the job be
looked at again at once.

Work per reconcile is bounded: at most :data:`WRITE_BATCH` children are created or
applied, and as many surplus ones deleted; a job with more to do is looked at again at
once, behind the jobs already waiting, and its Created condition says how far it got. So
a job of 2,000 pods never holds a worker and the shared write pool for minutes while
small jobs wait, and the children being written are the only ones the operator builds
and holds at a time (the plugins build children lazily, and the pass stops at the
batch)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.api.common import GangRestartStatus
from kubetrain.api.common import JobBase as Job
from kubetrain.api.progress_status import CheckpointStatus
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.controller import gang as G
from kubetrain.controller import podstate
from kubetrain.controller.decisions import NAMED_IN_STATUS, ChildRef, Decision, ref
from kubetrain.controller.model import WRITE_BATCH
from kubetrain.controller.plugins import children
from kubetrain.controller.plugins.autoscaler import KIND as HPA
from kubetrain.controller.plugins.progress_env import ProgressInjection, reports_progress
from kubetrain.controller.policies import gang_restart

if TYPE_CHECKING:
    from kubetrain.controller.draft import Draft

#: Children that are created once and never changed (pods and Jobs are immutable where
#: it matters; the SSH Secret must never be regenerated).
CREATE_ONCE = frozenset({"Pod", "Job", "Secret"})
#: Requeue delay after creating a child the startup gate waits for.
IMMEDIATE_REQUEUE_SECONDS = 0.05


def decide(draft: Draft) -> Decision:
    """The children to create, apply and delete (see the module docs)."""
    job, observed = draft.job, draft.observed
    assert job is not None
    recreating = {r.replica.pod_name for r in draft.restart.recreate} if draft.restart else set()
    surplus = _surplus(draft)
    decision = Decision(delete=surplus[:WRITE_BATCH])
    more = len(surplus) > WRITE_BATCH
    assert draft.gate is not None  # the startup policy comes first
    built: Iterable[dict[str, Any]] = draft.plugin.build(job, observed, draft.gate)
    state = draft.current.gang_restart
    if gang_restart.restarted(job, state):
        built = _with_attempt(job, state, gang_restart.scope(job)[0], built)
    injection = draft.plugin.progress
    if injection is not None and not isinstance(job, ResolvedTrainJob) and reports_progress(job):
        built = _with_progress(injection, job, built)
    checkpoint = draft.current.progress.checkpoint if draft.current.progress else None
    if checkpoint is not None:
        built = _with_checkpoint(checkpoint, built)
    gang = draft.plugin.gang_of(job)
    held = False
    if gang is not None:
        # The PodGroup counts every member: a gang's children are built in full (its
        # writes are still batched).
        built, held = with_gang(draft, gang, list(built))
    for desired in built:
        if len(decision.create) + len(decision.apply) >= WRITE_BATCH:
            more = True  # the rest is neither built nor compared in this reconcile
            break
        kind = desired["kind"]
        name = desired["metadata"]["name"]
        field = NAMED_IN_STATUS.get(kind)
        if field is not None and getattr(draft.current, field) != name:
            decision.status[field] = name  # recorded with this reconcile's status
        present = observed.by_kind(kind).get(name)
        if present is None:
            if name not in recreating:
                decision.create.append(desired)
        elif kind not in CREATE_ONCE and (
            children.observed_hash(present) != children.observed_hash(desired)
        ):
            decision.apply.append(desired)
    written = {(o["kind"], o["metadata"]["name"]) for o in (*decision.create, *decision.apply)}
    if held and any(o["kind"] == G.POD_GROUP for o in decision.create):
        # The pods follow as soon as the PodGroup is in the cache.
        decision.requeue_after = IMMEDIATE_REQUEUE_SECONDS
    if written & draft.plan.awaiting or more:
        # The gate was evaluated before this reconcile created what it waits for: look
        # again as soon as the write is in the cache (the Service may be all it lacked).
        # Or a batch is done and more children are missing: the next one comes once the
        # jobs already in the queue had their turn.
        decision.requeue_after = IMMEDIATE_REQUEUE_SECONDS
    if more:
        wanted = [r.pod_name for r in draft.plugin.replicas(job)]
        there = sum(1 for name in wanted if name in observed.pods)
        created = sum(1 for o in decision.create if o["kind"] == "Pod")
        draft.creating = (there + created, len(wanted))
    return decision


def decide_pinned(draft: Draft) -> Decision | None:
    """The children a job makes at its first reconcile whatever else that reconcile does
    (a TrainJob's runtime snapshot: a job created suspended pins its runtime too)."""
    missing = [
        c
        for c in draft.loaded.pinned
        if c["metadata"]["name"] not in draft.observed.by_kind(c["kind"])
    ]
    return Decision(create=missing) if missing else None


def with_gang(
    draft: Draft, gang: G.Gang, built: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], bool]:
    """``built`` with the job's PodGroup and its member pods marked for the gang
    scheduler; the members are left out (``True``) until the PodGroup exists (and, with
    Volcano, has left ``Pending``). Nothing changes while no member is built yet (a
    TrainJob's initializers run first)."""
    assert draft.job is not None
    job = draft.job
    members = [c for c in built if G.is_member(gang, c)]
    if not members:
        return built, False
    for member in members:
        G.mark(gang, job.name, member)
    metadata = children.metadata(job, job.name, children.job_labels(job))
    group = children.with_hash(
        G.pod_group(gang, job.name, children.namespace_of(job), members, metadata)
    )
    held = G.holds_pods(gang, draft.observed.pod_groups.get(job.name))
    ids = {id(m) for m in members}
    kept = [c for c in built if not (held and id(c) in ids)]
    return [group, *kept], held


def _with_attempt(
    job: Job, state: GangRestartStatus | None, never: bool, built: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """``built`` with the gang restart's attempt (and its reason) on each pod, one child
    at a time; ``never``: the pods' restartPolicy is Never (restart scope Gang)."""
    attempt, reason = (state.attempt, state.reason) if state else (0, None)
    for child in built:
        gang_restart.with_attempt(job, attempt, [child], reason=reason, never=never)
        yield child


def _with_progress(
    injection: ProgressInjection, job: Job, built: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """A v1 job's children with the progress server's CA ConfigMap first and its
    environment in every pod (``plugins/progress_env``)."""
    yield children.with_hash(injection.config_map(job))
    for child in built:
        injection.inject_all(job, [child])
        yield child


def _with_checkpoint(
    checkpoint: CheckpointStatus, built: Iterable[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """Children whose pods are told the job's last reported checkpoint (a restarted or
    resumed gang starts from it)."""
    env = [
        {"name": E.CHECKPOINT_STEP, "value": str(checkpoint.step)},
        {"name": E.CHECKPOINT_PATH, "value": checkpoint.location},
    ]
    ours = {e["name"] for e in env}
    for child in built:
        if child["kind"] in ("Pod", "Job"):
            spec = child["spec"] if child["kind"] == "Pod" else child["spec"]["template"]["spec"]
            for container in spec.get("containers") or []:
                kept = [e for e in container.get("env") or [] if e.get("name") not in ours]
                container["env"] = kept + [dict(e) for e in env]
        yield child


def _surplus(draft: Draft) -> list[ChildRef]:
    """Per-replica pods and Services no replica needs any more (scaled down or a replica
    type removed), and an HPA the job no longer asks for."""
    assert draft.job is not None
    wanted = {r.pod_name for r in draft.plugin.replicas(draft.job)}
    out: list[ChildRef] = []
    if draft.plugin.autoscaling(draft.job) is None:
        out += [r for o in draft.observed.autoscalers.values() if not (r := ref(HPA, o)).deleting]
    for kind in ("Pod", "Service"):
        for name, obj in sorted(draft.observed.by_kind(kind).items()):
            obj_labels = (obj.get("metadata") or {}).get("labels") or {}
            if K.REPLICA_INDEX not in obj_labels or obj_labels.get(K.JOB_ROLE) == "launcher":
                continue
            if name not in wanted and not podstate.is_deleting(obj):
                out.append(ref(kind, obj))
    return out
