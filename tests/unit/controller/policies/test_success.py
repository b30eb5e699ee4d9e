"""Success per kind (upstream's rules)."""

from __future__ import annotations

import pytest

from kubetrain.api.common import ConditionType
from kubetrain.api.common import RestartPolicy as P
from kubetrain.controller.plugins.base import Observed, Replica
from kubetrain.controller.policies import success
from tests.unit.controller.builders import batch_job, pod


def replicas(*specs: tuple[str, int]) -> list[Replica]:
    return [
        Replica(rtype, i, f"job-{rtype.lower()}-{i}", P.ON_FAILURE, "main")
        for rtype, count in specs
        for i in range(count)
    ]


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
    outcome = success.pytorch("job", replicas(*specs), observed(**phases), elastic=elastic)
    assert (outcome is not None) is succeeded
    if outcome is not None:
        assert outcome.condition is ConditionType.SUCCEEDED
        assert outcome.reason == "PyTorchJobSucceeded"


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
    outcome = success.tensorflow(
        "job", replicas(*specs), observed(**phases), all_workers=all_workers
    )
    assert (outcome is not None) is succeeded


def test_mpi_succeeds_with_its_launcher_job() -> None:
    done = batch_job("job-launcher", "Complete", completionTime="2026-01-02T12:00:00Z")
    outcome = success.mpi("job", done, [])
    assert outcome is not None and outcome.condition is ConditionType.SUCCEEDED
    assert outcome.at == "2026-01-02T12:00:00Z"
    assert success.mpi("job", batch_job("job-launcher"), []) is None
    assert success.mpi("job", None, []) is None


def test_mpi_fails_with_the_launcher_jobs_reason_and_last_pod() -> None:
    failed = batch_job(
        "job-launcher",
        "Failed",
        reason="BackoffLimitExceeded",
        message="Job has reached the specified backoff limit",
    )
    pods = [pod("job-launcher-abc", "Failed", exit_code=3)]
    outcome = success.mpi("job", failed, pods)
    assert outcome is not None and outcome.condition is ConditionType.FAILED
    assert outcome.reason == "BackoffLimitExceeded"
    assert "backoff limit" in outcome.message and "exit code 3" in outcome.message
