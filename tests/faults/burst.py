"""A mixed burst of jobs driven to the end while faults are injected, and the checks every
fault test makes afterwards: every job terminal with the right status, and no child made
twice."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from kubetrain.api import keys as K
from tests.integration.kube import condition, wait_for
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job, tf_job


@dataclass(frozen=True)
class BurstJob:
    kind: str
    name: str
    #: The pods the job must have while it runs (the MPI launcher's pod is named by the
    #: batch Job controller, and found by its label).
    pods: frozenset[str]
    #: A Worker OOM-killed once while it runs (PyTorch, restartPolicy ExitCode).
    oom: str | None = None


def mixed_burst(prefix: str, each: int) -> list[tuple[BurstJob, dict[str, Any]]]:
    """``each`` PyTorchJobs (one of their Workers to be OOM-killed), TFJobs and MPIJobs."""
    out: list[tuple[BurstJob, dict[str, Any]]] = []
    for i in range(each):
        name = f"{prefix}-pt-{i}"
        out.append(
            (
                BurstJob(
                    "PyTorchJob",
                    name,
                    frozenset({f"{name}-master-0", f"{name}-worker-0"}),
                    oom=f"{name}-worker-0",
                ),
                pytorch_job(name, workers=1, restart_policy="ExitCode"),
            )
        )
        name = f"{prefix}-tf-{i}"
        out.append(
            (
                BurstJob("TFJob", name, frozenset({f"{name}-chief-0", f"{name}-worker-0"})),
                tf_job(name, workers=1, ps=0),
            )
        )
        name = f"{prefix}-mpi-{i}"
        out.append(
            (BurstJob("MPIJob", name, frozenset({f"{name}-worker-0"})), mpi_job(name, workers=1))
        )
    return out


def launcher_pods(jobs: Jobs, name: str) -> list[str]:
    return [
        pod_name
        for pod_name, pod in jobs.pods(name).items()
        if pod["metadata"]["labels"].get(K.JOB_ROLE) == "launcher"
    ]


def deciding_pod(jobs: Jobs, job: BurstJob) -> str:
    """The pod whose exit 0 makes the job succeed."""
    if job.kind == "MPIJob":
        (launcher,) = launcher_pods(jobs, job.name)
        return launcher
    return min(job.pods)  # <job>-chief-0 / <job>-master-0 sort before the workers


def _running(jobs: Jobs, job: BurstJob) -> bool:
    found = jobs.get(job.kind, job.name)
    return (condition(found, "Running") or {}).get("status") == "True"


def drive(jobs: Jobs, burst: list[BurstJob], *, timeout: float = 240.0) -> float:
    """Each job to Running, its OOM injected and restarted, then to Succeeded (its deciding
    pod exits 0); tolerant of the operator being away meanwhile. Returns the seconds
    from the first call to the last job Succeeded."""
    started = time.monotonic()
    deadline = started + timeout
    pending = {job.name: job for job in burst}
    oom_uid: dict[str, str] = {}
    finished: set[str] = set()
    while pending:
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"not Succeeded in {timeout:.0f}s: {sorted(pending)}\n"
                + "\n".join(_describe(jobs, job) for job in pending.values())
            )
        # The API server may be away (a fault under test): then look again.
        with contextlib.suppress(ApiException, urllib3.exceptions.HTTPError):
            _step(jobs, pending, oom_uid, finished)
        time.sleep(0.5)
    return time.monotonic() - started


def _describe(jobs: Jobs, job: BurstJob) -> str:
    """Where a job stands: its conditions, its pods' phases (for a failure message)."""
    try:
        found = jobs.get(job.kind, job.name)
        pods = jobs.pods(job.name)
    except (ApiException, urllib3.exceptions.HTTPError) as err:
        return f"  {job.name}: unreadable ({err})"
    conditions = [
        f"{c['type']}={c['status']} ({c.get('reason')})"
        for c in ((found or {}).get("status") or {}).get("conditions") or []
    ]
    phases = {name: (pod.get("status") or {}).get("phase") for name, pod in sorted(pods.items())}
    return f"  {job.name}: {', '.join(conditions) or 'no conditions'}; pods {phases}"


def _step(
    jobs: Jobs, pending: dict[str, BurstJob], oom_uid: dict[str, str], finished: set[str]
) -> None:
    """One look at every pending job, and the next push each can take."""
    for name, job in list(pending.items()):
        found = jobs.get(job.kind, name)
        if (condition(found, "Succeeded") or {}).get("status") == "True":
            del pending[name]
            continue
        failed = condition(found, "Failed")
        assert not failed or failed.get("status") != "True", f"{name} failed: {failed}"
        if name in finished or not _running(jobs, job):
            continue
        pods = jobs.pods(name)
        if job.oom is not None and name not in oom_uid:
            oom_uid[name] = pods[job.oom]["metadata"]["uid"]
            jobs.exit(job.oom, 137, "OOMKilled")
            continue
        if job.oom is not None:
            replaced = pods.get(job.oom, {}).get("metadata", {}).get("uid")
            if replaced in (None, oom_uid[name]):
                continue  # not recreated yet
        try:
            jobs.exit(deciding_pod(jobs, job), 0)
        except ValueError:
            continue  # the launcher pod is not there yet
        finished.add(name)


def check_outcome(jobs: Jobs, burst: list[BurstJob]) -> None:
    """Every job Succeeded with the status it should have, and no child made twice: no
    pod but the replicas' (one MPI launcher pod), the exact Services, one MPI launcher
    Job, ConfigMap and SSH Secret (its generated name the one in the status), and each
    PyTorchJob's one OOM kill counted as exactly one restart."""
    for job in burst:
        found = wait_for(
            lambda j=job: jobs.get(j.kind, j.name),  # type: ignore[misc]
            lambda obj: (condition(obj, "Succeeded") or {}).get("status") == "True",
            what=f"{job.kind} {job.name} Succeeded",
        )
        assert found is not None
        status = found["status"]
        created = [c for c in status["conditions"] if c["type"] == "Created"]
        assert len(created) == 1, (job.name, status["conditions"])
        assert not [
            c for c in status["conditions"] if c["type"] == "Failed" and c["status"] == "True"
        ]
        pods = set(jobs.pods(job.name))
        services = set(jobs.services(job.name))
        # Pods still running after the success may be stopped by the cleanup (MPI
        # workers at once, others after the grace period): none may be unknown.
        allowed = set(job.pods)
        if job.kind == "MPIJob":
            launchers = launcher_pods(jobs, job.name)
            assert len(launchers) == 1, (job.name, launchers)
            allowed.update(launchers)
        assert pods <= allowed, (job.name, pods)
        if job.kind == "MPIJob":
            assert services == {job.name}, (job.name, services)
            assert len(jobs.batch_jobs(job.name)) == 1, job.name
            assert len(jobs.config_maps(job.name)) == 1, job.name
            secrets = jobs.secrets(job.name)
            assert list(secrets) == [status["sshAuthSecretName"]], (job.name, list(secrets))
        else:
            assert services == job.pods, (job.name, services)
        restarts = {t: s.get("restarts", 0) for t, s in status["replicaStatuses"].items()}
        expected = {t: 0 for t in restarts}
        if job.oom is not None:
            expected["Worker"] = 1
        assert restarts == expected, (job.name, restarts)
        assert not any("countedFailures" in s for s in status["replicaStatuses"].values())
