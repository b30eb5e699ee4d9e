"""A TrainJob's status, written so the Kubeflow SDK reads it right.

The SDK reports ``Running`` only while ``status.conditions`` is empty (kubeflow/sdk#803):
any condition, even ``Suspended=False``, freezes it at ``Created``. So the TrainJob's
``conditions`` hold only what the SDK must see: ``Complete`` or ``Failed`` at the end
(``True``), and ``Suspended`` while it is suspended (removed on resume).

Their reasons are upstream's, which JobSet gives them: ``AllJobsCompleted``;
``FailedJobs`` when a pod's failure failed its Job (restarts used up, or a restartPolicy
that does not retry); ``DeadlineExceeded``; ``Suspended``. ``Complete`` has JobSet's
message too (``jobset completed successfully``); the others have kubetrain's precise
cause. kubetrain's own reasons and messages are in ``status.kubetrain``. Failures no Job has (a
runtime that never appeared, a start that timed out, a child the API server refused)
keep kubetrain's reason.

The lifecycle kubetrain tracks for every kind (Created, Running, Restarting, the
restarts per replicated job) lives in ``status.kubetrain``, which the SDK does not read,
and ``status.state`` says it in one word for ``kubectl get trainjobs``. ``jobsStatus``
has all six counts of every replicated job (the SDK raises on a partial entry), counted
in Jobs as JobSet counts them (one Job per replicated job: a 4-node job that completed
is ``ready 0, succeeded 1``); ``nodes``, ``readyNodes`` and ``restarts`` count pods.
An elastic TrainJob (its runtime's torch ``elasticPolicy``) also has ``elastic`` (the
bounds its ``numNodes`` may change within) and ``selector`` (its node pods' label
selector): with ``nodes``, what its scale subresource reads.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.common import (
    ConditionStatus,
    ConditionType,
    JobBase,
    JobCondition,
    JobStatus,
    ReplicaStatus,
)
from kubetrain.api.trainer.resolve import LAUNCHER, NODE_JOB, ResolvedTrainJob
from kubetrain.api.trainer.trainjob import Bookkeeping, Condition, TrainJobStatus
from kubetrain.api.trainer.trainjob import JobStatus as ReplicatedJobStatus
from kubetrain.controller import podstate
from kubetrain.controller import reasons as R
from kubetrain.controller.model import Observed, status_or_empty
from kubetrain.frameworks.addressing import trainjob_pod_name
from kubetrain.frameworks.pytorch import trainjob_elastic

#: The SDK's names for the final conditions.
COMPLETE = "Complete"
FAILED = "Failed"
SUSPENDED = "Suspended"


def _from_sdk_conditions(status: TrainJobStatus) -> list[JobCondition]:
    """Final conditions written by another controller (a TrainJob that ended before
    kubetrain took over), read as the operator's."""
    out = []
    for cond in status.conditions or []:
        if cond.status.value != "True" or cond.type not in (COMPLETE, FAILED):
            continue
        kind = ConditionType.SUCCEEDED if cond.type == COMPLETE else ConditionType.FAILED
        out.append(
            JobCondition(
                type=kind,
                status=ConditionStatus.TRUE,
                reason=cond.reason,
                message=cond.message,
                last_transition_time=cond.last_transition_time,
                last_update_time=cond.last_transition_time,
            )
        )
    return out


def state_of(conditions: list[JobCondition]) -> str | None:
    """One word for ``kubectl get``: the final state, else Suspended, Restarting, Running
    or Created."""
    live = {c.type for c in conditions if c.status == ConditionStatus.TRUE}
    for kind, word in (
        (ConditionType.SUCCEEDED, COMPLETE),
        (ConditionType.FAILED, FAILED),
        (ConditionType.SUSPENDED, SUSPENDED),
        (ConditionType.RESTARTING, "Restarting"),
        (ConditionType.RUNNING, "Running"),
        (ConditionType.CREATED, "Created"),
    ):
        if kind in live:
            return word
    return None


#: kubetrain's reasons for a TrainJob that failed because one of its Jobs would have.
JOB_FAILURE_REASONS = frozenset(
    {
        K.BACKOFF_LIMIT_EXCEEDED,
        R.lifecycle("TrainJob", R.Verb.FAILED),
        R.lifecycle("TrainJob", R.Verb.EVICTED),
    }
)


def sdk_reason(cond: JobCondition) -> str:
    """The reason upstream gives the TrainJob condition ``cond`` becomes (module docs)."""
    if cond.type == ConditionType.SUCCEEDED:
        return K.TRAINJOB_COMPLETE_REASON
    if cond.type == ConditionType.SUSPENDED:
        return K.TRAINJOB_SUSPENDED_REASON
    if cond.type == ConditionType.FAILED and cond.reason in JOB_FAILURE_REASONS:
        return K.TRAINJOB_FAILED_JOBS_REASON
    return cond.reason or cond.type.value


def sdk_message(cond: JobCondition) -> str:
    """The message of the TrainJob condition ``cond`` becomes: upstream's for Complete,
    kubetrain's (the precise cause) for the others."""
    if cond.type == ConditionType.SUCCEEDED:
        return K.TRAINJOB_COMPLETE_MESSAGE
    return (cond.message or "")[:32768]


def _sdk_conditions(conditions: list[JobCondition]) -> list[Condition]:
    out = []
    for cond in conditions:
        if cond.status != ConditionStatus.TRUE:
            continue
        names = {
            ConditionType.SUCCEEDED: COMPLETE,
            ConditionType.FAILED: FAILED,
            ConditionType.SUSPENDED: SUSPENDED,
        }
        name = names.get(cond.type)
        if name is None:
            continue
        out.append(
            Condition(
                type=name,
                status="True",
                reason=sdk_reason(cond),
                message=sdk_message(cond),
                last_transition_time=cond.last_transition_time or cond.last_update_time or "",
            )
        )
    return out


def node_selector(job: ResolvedTrainJob) -> str:
    """The label selector of a TrainJob's trainer pods (its scale subresource's)."""
    return (
        f"{K.JOBSET_NAME_LABEL}={job.name},{K.JOBSET_REPLICATED_JOB_LABEL}={job.spec.trainer_job}"
    )


def _ready(observed: Observed, name: str) -> bool:
    pod = observed.pods.get(name)
    return pod is not None and (podstate.is_ready(pod) or podstate.is_succeeded(pod))


def _job_status(
    job: ResolvedTrainJob,
    name: str,
    counts: ReplicaStatus | None,
    observed: Observed,
    suspended: bool,
    trainjob_failed: bool,
) -> ReplicatedJobStatus:
    """Replicated job ``name`` counted as JobSet counts it: in Jobs, not pods. Each
    replicated job is one Job (index 0), so every count is 0 or 1:

    - succeeded: every one of its pods succeeded (the Job is Complete);
    - failed: the TrainJob failed and one of its pods had (the Job is Failed);
    - while the Job is not finished: active when a pod of it runs or waits to, ready
      when every pod is Ready or Succeeded, suspended while the TrainJob is.
    """
    pods = [trainjob_pod_name(job.name, name, i) for i in range(job.pods_of(name))]
    complete = bool(pods) and counts is not None and (counts.succeeded or 0) >= len(pods)
    failed = not complete and trainjob_failed and counts is not None and (counts.failed or 0) > 0
    running = not (complete or failed)
    live = [observed.pods.get(p) for p in pods]
    active = any(
        pod is not None and not (podstate.is_succeeded(pod) or podstate.is_failed(pod))
        for pod in live
    )
    ready = bool(pods) and all(_ready(observed, p) for p in pods)
    return ReplicatedJobStatus(
        name=name,
        ready=int(running and ready and not suspended),
        succeeded=int(complete),
        failed=int(failed),
        active=int(running and active),
        suspended=int(running and suspended),
    )


class TrainJobStatusCodec:
    """Reads and writes a TrainJob's status (see the module docs)."""

    def _parse(self, raw_status: Any) -> TrainJobStatus:
        return status_or_empty(TrainJobStatus, raw_status)

    def read(self, raw_status: Any) -> JobStatus:
        status = self._parse(raw_status)
        book = status.kubetrain or Bookkeeping()
        conditions = list(book.conditions or []) or _from_sdk_conditions(status)
        return JobStatus(
            conditions=conditions or None,
            replica_statuses=dict(book.replica_statuses) if book.replica_statuses else None,
            start_time=status.start_time,
            completion_time=status.completion_time,
            ssh_auth_secret_name=book.ssh_auth_secret_name,
            gang_restart=book.gang_restart,
            trainer_status=status.trainer_status,
            progress=book.progress,
            goodput=book.goodput,
        )

    def write(self, job: JobBase | None, status: JobStatus, observed: Observed) -> dict[str, Any]:
        conditions = list(status.conditions or [])
        replicas = dict(status.replica_statuses or {})
        out: dict[str, Any] = {}
        sdk = _sdk_conditions(conditions)
        if sdk:
            out["conditions"] = [c.to_wire() for c in sdk]
        if isinstance(job, ResolvedTrainJob):
            suspended = bool(job.run_policy and job.run_policy.suspend)
            failed = any(
                c.type == ConditionType.FAILED and c.status == ConditionStatus.TRUE
                for c in conditions
            )
            entries = [
                _job_status(job, name, replicas.get(name), observed, suspended, failed).to_wire()
                for name in job.spec.replicated_jobs
            ]
            out["jobsStatus"] = entries
            node_jobs = [job.spec.trainer_job]
            if job.spec.mpi is not None:
                node_jobs = [LAUNCHER, NODE_JOB]
            node_pods = [
                trainjob_pod_name(job.name, n, i) for n in node_jobs for i in range(job.pods_of(n))
            ]
            out["nodes"] = len(node_pods)
            out["readyNodes"] = sum(1 for p in node_pods if _ready(observed, p))
            elastic = trainjob_elastic(job)
            if elastic is not None:
                # What the update rules let numNodes change within, and the scale
                # subresource's selector.
                out["elastic"] = {"minNodes": elastic.min_nodes, "maxNodes": elastic.max_nodes}
                out["selector"] = node_selector(job)
        # What backoffLimit is measured against, as the Job controller and the restart
        # Events count it: pods recreated, and the in-place restarts of the pods there.
        restarts = sum((r.restarts or 0) for r in replicas.values())
        restarts += sum(podstate.restart_count(pod) for pod in observed.pods.values())
        if restarts or "nodes" in out:
            out["restarts"] = restarts
        if status.start_time:
            out["startTime"] = status.start_time
        if status.completion_time:
            out["completionTime"] = status.completion_time
        state = state_of(conditions)
        if state is not None:
            out["state"] = state
        book = Bookkeeping(
            conditions=conditions or None,
            replica_statuses=replicas or None,
            ssh_auth_secret_name=status.ssh_auth_secret_name,
            gang_restart=status.gang_restart,
            goodput=status.goodput,
        ).to_wire()
        if book:
            out["kubetrain"] = book
        return TrainJobStatus.model_validate(out).to_wire()

    def normalized(self, raw_status: Any) -> dict[str, Any]:
        wire = self._parse(raw_status).to_wire()
        # The training process's (the progress server writes them), never written here.
        wire.pop("trainerStatus", None)
        book = wire.get("kubetrain")
        if isinstance(book, dict):
            book.pop("progress", None)
            if not book:
                wire.pop("kubetrain")
        return wire


CODEC = TrainJobStatusCodec()
