"""Success per kind (upstream's rules, stated once in ``kubetrain.frameworks``), answered
from pods by the operator and from exit codes by the local runner: the same table holds
for both."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.common import ConditionType
from kubetrain.api.loader import Job
from kubetrain.controller.model import Observed
from kubetrain.controller.policies import success
from kubetrain.frameworks import framework_for
from kubetrain.local.plan import job_succeeded
from tests.builders.jobs import template
from tests.builders.observed import batch_job, mpi_raw, pod, typed


def job(kind: str, *specs: tuple[str, int], **spec: Any) -> Job:
    container = {"PyTorchJob": "pytorch", "TFJob": "tensorflow"}[kind]
    field = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}[kind]
    replica_specs = {
        rtype: {"replicas": count, "template": template(container)} for rtype, count in specs
    }
    version = "v1"
    return typed(
        {
            "apiVersion": f"kubeflow.org/{version}",
            "kind": kind,
            "metadata": {"name": "job", "namespace": "ns"},
            "spec": {field: replica_specs, **spec},
        }
    )


def decided_alike(typed_job: Job, phases: dict[str, str]) -> bool:
    """The operator's verdict (from pods), checked to equal the local runner's (from exit
    codes) for the same replicas."""
    pods = observed(**phases)
    outcome = success.from_pods(framework_for(typed_job.kind), typed_job, pods)
    exit_codes = {}
    for name, phase in phases.items():
        _, rtype, index = name.split("_")
        kinds = {t.lower(): t for t in typed_job.replica_specs()}
        exit_codes[(kinds[rtype], int(index))] = 0 if phase == "Succeeded" else None
    assert job_succeeded(typed_job, exit_codes) is (outcome is not None)
    if outcome is not None:
        assert outcome.condition is ConditionType.SUCCEEDED
        assert outcome.reason == f"{typed_job.kind}Succeeded"
    return outcome is not None


def observed(**phases: str) -> Observed:
    return Observed(
        pods={
            name.replace("_", "-"): pod(name.replace("_", "-"), phase)
            for name, phase in phases.items()
        }
    )


@pytest.mark.parametrize(
    ("specs", "phases", "elastic", "succeeded"),
    [
        pytest.param(
            [("Master", 1), ("Worker", 2)],
            {"job_master_0": "Succeeded", "job_worker_0": "Running"},
            False,
            True,
            id="master-decides",
        ),
        pytest.param(
            [("Master", 1), ("Worker", 2)],
            {"job_master_0": "Running", "job_worker_0": "Succeeded", "job_worker_1": "Succeeded"},
            False,
            False,
            id="workers-do-not-decide-with-a-master",
        ),
        pytest.param(
            [("Worker", 2)],
            {"job_worker_0": "Succeeded", "job_worker_1": "Succeeded"},
            False,
            True,
            id="all-workers",
        ),
        pytest.param(
            [("Worker", 2)],
            {"job_worker_0": "Succeeded", "job_worker_1": "Running"},
            False,
            False,
            id="one-worker-is-not-enough",
        ),
        pytest.param(
            [("Worker", 2)],
            {"job_worker_0": "Running", "job_worker_1": "Succeeded"},
            True,
            True,
            id="elastic-any-worker",
        ),
    ],
)
def test_pytorch(
    specs: list[tuple[str, int]], phases: dict[str, str], elastic: bool, succeeded: bool
) -> None:
    extra: dict[str, Any] = {"elasticPolicy": {"maxReplicas": 2}} if elastic else {}
    assert decided_alike(job("PyTorchJob", *specs, **extra), phases) is succeeded


@pytest.mark.parametrize(
    ("specs", "phases", "all_workers", "succeeded"),
    [
        pytest.param(
            [("Chief", 1), ("Worker", 2)],
            {"job_chief_0": "Succeeded"},
            False,
            True,
            id="chief-decides",
        ),
        pytest.param(
            [("Master", 1), ("Worker", 1)],
            {"job_master_0": "Running", "job_worker_0": "Succeeded"},
            False,
            False,
            id="master-as-chief",
        ),
        pytest.param(
            [("PS", 1), ("Worker", 2)],
            {"job_worker_0": "Succeeded", "job_worker_1": "Running"},
            False,
            True,
            id="worker-0-by-default",
        ),
        pytest.param(
            [("PS", 1), ("Worker", 2)],
            {"job_worker_0": "Succeeded", "job_worker_1": "Running"},
            True,
            False,
            id="all-workers-policy-waits",
        ),
        pytest.param(
            [("Worker", 2)],
            {"job_worker_0": "Succeeded", "job_worker_1": "Succeeded"},
            True,
            True,
            id="all-workers-policy",
        ),
        pytest.param(
            [("Worker", 2)], {"job_worker_1": "Succeeded"}, False, False, id="not-worker-0"
        ),
    ],
)
def test_tensorflow(
    specs: list[tuple[str, int]], phases: dict[str, str], all_workers: bool, succeeded: bool
) -> None:
    extra: dict[str, Any] = {"successPolicy": "AllWorkers"} if all_workers else {}
    assert decided_alike(job("TFJob", *specs, **extra), phases) is succeeded


def test_mpi_succeeds_with_its_launcher_job() -> None:
    mpi = typed(mpi_raw(workers=1))
    done = batch_job("job-launcher", "Complete", completionTime="2026-01-02T12:00:00Z")
    outcome = success.mpi(mpi, done, [])
    assert outcome is not None and outcome.condition is ConditionType.SUCCEEDED
    assert outcome.at == "2026-01-02T12:00:00Z"
    assert "job-launcher completed" in outcome.message
    assert success.mpi(mpi, batch_job("job-launcher"), []) is None
    assert success.mpi(mpi, None, []) is None
    assert job_succeeded(mpi, {("Launcher", 0): 0})
    assert not job_succeeded(mpi, {("Launcher", 0): 1, ("Worker", 0): 0})


def test_mpi_fails_with_the_launcher_jobs_reason_and_last_pod() -> None:
    failed = batch_job(
        "job-launcher",
        "Failed",
        reason="BackoffLimitExceeded",
        message="Job has reached the specified backoff limit",
    )
    pods = [pod("job-launcher-abc", "Failed", exit_code=3)]
    outcome = success.mpi(typed(mpi_raw(workers=1)), failed, pods)
    assert outcome is not None and outcome.condition is ConditionType.FAILED
    assert outcome.reason == "BackoffLimitExceeded"
    assert "backoff limit" in outcome.message and "exit code 3" in outcome.message
