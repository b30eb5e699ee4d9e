"""Restarts counted as the Job controller counts them, per replicated job (TrainJobs).

A TrainJob's replicated job is a batch/v1 Job upstream, each with its own
``backoffLimit`` (from the runtime's Job template, 6 when unset), and a Job that uses it
up fails the JobSet (``failurePolicy.maxRestarts`` 0) and so the TrainJob. The Job
controller's rules, which :func:`restart.evaluate` applies with ``batch_job=True``:

- a failed pod is replaced whatever the pod's ``restartPolicy`` (``Never`` included),
  until more than ``backoffLimit`` pods of that Job have failed;
- with ``OnFailure`` the kubelet restarts containers in place, and the Job fails once
  their restarts (over its running pods) reach ``backoffLimit`` (1 when it is 0);
- each Job counts only its own pods.

So the default runtime's trainer fails at the 6th container exit (kubetrain's v1 model
allows 6 restarts, failing at the 7th), and a ``Never`` trainer is retried 6 times
instead of failing at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kubetrain.controller.model import Observed, Replica, RestartVerdict
from kubetrain.controller.policies.restart import evaluate


def evaluate_jobs(
    kind: str,
    replicas: Sequence[Replica],
    observed: Observed,
    *,
    limits: Mapping[str, int],
    restarts: Mapping[str, int],
    counted: Mapping[str, frozenset[str]],
    seen_restart_counts: Mapping[str, int],
    tolerates_failure: Callable[[Replica], bool],
    job_name: str,
) -> RestartVerdict:
    """:func:`restart.evaluate` for each replicated job against its own limit; the
    first that fails ends the job (its in-place restarts up to then still count)."""
    verdicts: list[RestartVerdict] = []
    for rtype in dict.fromkeys(r.replica_type for r in replicas):
        verdict = evaluate(
            kind,
            [r for r in replicas if r.replica_type == rtype],
            observed,
            backoff_limit=limits.get(rtype),
            restarts={rtype: restarts[rtype]} if rtype in restarts else {},
            counted={rtype: counted[rtype]} if rtype in counted else {},
            seen_restart_counts=seen_restart_counts,
            tolerates_failure=tolerates_failure,
            job_name=job_name,
            batch_job=True,
        )
        verdicts.append(verdict)
        if verdict.failure is not None:
            break
    looked = {uid: n for v in verdicts for uid, n in v.restart_counts.items()}
    in_place = tuple(r for v in verdicts for r in v.in_place)
    failed = next((v for v in verdicts if v.failure is not None), None)
    if failed is not None:
        return RestartVerdict(
            failure=failed.failure,
            restarts=dict(restarts),
            used=failed.used,
            in_place=in_place,
            restart_counts=looked,
        )
    made = dict(restarts)
    counted_now: dict[str, frozenset[str]] = {}
    for verdict in verdicts:
        made.update(verdict.restarts)
        counted_now.update(verdict.counted)
    recreating = next((v for v in verdicts if v.recreate), None)
    return RestartVerdict(
        recreate=tuple(r for v in verdicts for r in v.recreate),
        restarts=made,
        used=recreating.used if recreating is not None else 0,
        in_place=in_place,
        counted=counted_now,
        restart_counts=looked,
    )
