"""The restart model on real pods: what each restartPolicy does with a failure, how
backoffLimit counts restarts, and that every path ends in a final state."""

from __future__ import annotations

from tests.integration.kube import condition
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, pytorch_job


def _uid(pod: dict[str, object]) -> str:
    return str(pod["metadata"]["uid"])  # type: ignore[index]


def test_exit_code_policy_recreates_a_pod_killed_by_a_signal(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("ec", workers=1, restart_policy="ExitCode"))
    pods = jobs.wait_running("ec", {"ec-master-0", "ec-worker-0"})
    assert pods["ec-worker-0"]["spec"]["restartPolicy"] == "Never"
    first = _uid(pods["ec-worker-0"])

    jobs.exit("ec-worker-0", 137, "OOMKilled")
    pods = jobs.wait_pods(
        "ec",
        lambda p: (
            "ec-worker-0" in p
            and _uid(p["ec-worker-0"]) != first
            and p["ec-worker-0"]["status"].get("phase") == "Running"
        ),
        what="ec-worker-0 recreated and Running",
    )
    job = jobs.wait_condition("PyTorchJob", "ec", "Running")
    assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    event = jobs.wait_event("ec", "OOMKilled")
    assert "exit code 137" in event["message"] and "restarts used: 1" in event["message"]


def test_exit_code_policy_fails_the_job_on_a_program_error(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("bad", workers=1, restart_policy="ExitCode"))
    jobs.wait_running("bad", {"bad-master-0", "bad-worker-0"})
    jobs.exit("bad-worker-0", 1)
    job = jobs.wait_condition("PyTorchJob", "bad", "Failed")
    failed = condition(job, "Failed")
    assert failed is not None
    assert failed["reason"] == "PyTorchJobFailed"
    assert "exit code 1" in failed["message"] and "ExitCode" in failed["message"]
    # Not stuck in Restarting (trainer#2044); the failed pod stays for its logs, the
    # master that was still running is stopped.
    assert condition(job, "Restarting") is None
    pods = jobs.wait_pods("bad", lambda p: set(p) == {"bad-worker-0"}, what="the failed pod only")
    assert pods["bad-worker-0"]["status"]["phase"] == "Failed"


def test_never_policy_fails_the_job_on_any_failure(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(pytorch_job("never", workers=1, restart_policy="Never"))
    jobs.wait_running("never", {"never-master-0", "never-worker-0"})
    jobs.exit("never-worker-0", 137, "OOMKilled")
    job = jobs.wait_condition("PyTorchJob", "never", "Failed")
    assert "OOMKilled" in condition(job, "Failed")["message"]  # type: ignore[index]


def test_on_failure_restarts_in_place_and_reports_the_reason(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("onf", workers=1, restart_policy="OnFailure"))
    pods = jobs.wait_running("onf", {"onf-master-0", "onf-worker-0"})
    assert pods["onf-worker-0"]["spec"]["restartPolicy"] == "OnFailure"
    before = _uid(pods["onf-worker-0"])
    jobs.exit("onf-worker-0", 137, "OOMKilled")
    event = jobs.wait_event("onf", "OOMKilled")
    assert "onf-worker-0 restarted a container" in event["message"]
    after = jobs.pods("onf")["onf-worker-0"]
    assert _uid(after) == before  # the same pod: the kubelet restarted the container
    assert after["status"]["containerStatuses"][0]["restartCount"] == 1
    assert jobs.state("PyTorchJob", "onf") == "Running"


def test_always_policy_restarts_in_place(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(pytorch_job("alw", workers=1, restart_policy="Always"))
    pods = jobs.wait_running("alw", {"alw-master-0", "alw-worker-0"})
    assert pods["alw-worker-0"]["spec"]["restartPolicy"] == "Always"
    jobs.exit("alw-worker-0", 2)
    jobs.wait_event("alw", "Error")
    assert jobs.state("PyTorchJob", "alw") == "Running"


def test_an_evicted_pod_is_recreated_under_on_failure(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("evict", workers=1, restart_policy="OnFailure"))
    pods = jobs.wait_running("evict", {"evict-master-0", "evict-worker-0"})
    first = _uid(pods["evict-worker-0"])
    jobs.evict("evict-worker-0")
    jobs.wait_pods(
        "evict",
        lambda p: "evict-worker-0" in p and _uid(p["evict-worker-0"]) != first,
        what="evict-worker-0 recreated",
    )
    event = jobs.wait_event("evict", "Evicted")
    assert "low on resource" in event["message"]
    job = jobs.wait_condition("PyTorchJob", "evict", "Running")
    assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 1


def test_backoff_limit_counts_recreated_pods(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(
        pytorch_job("bo", workers=1, restart_policy="ExitCode", run_policy={"backoffLimit": 1})
    )
    pods = jobs.wait_running("bo", {"bo-master-0", "bo-worker-0"})
    first = _uid(pods["bo-worker-0"])
    jobs.exit("bo-worker-0", 143)
    pods = jobs.wait_pods(
        "bo",
        lambda p: (
            "bo-worker-0" in p
            and _uid(p["bo-worker-0"]) != first
            and p["bo-worker-0"]["status"].get("phase") == "Running"
        ),
        what="bo-worker-0 recreated once",
    )
    jobs.exit("bo-worker-0", 143)
    job = jobs.wait_condition("PyTorchJob", "bo", "Failed")
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "backoffLimit 1" in failed["message"]
    assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 1


def test_backoff_limit_counts_in_place_restarts(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(
        pytorch_job("ip", workers=1, restart_policy="OnFailure", run_policy={"backoffLimit": 1})
    )
    jobs.wait_running("ip", {"ip-master-0", "ip-worker-0"})
    jobs.exit("ip-worker-0", 1)
    jobs.wait_pods(
        "ip",
        lambda p: p["ip-worker-0"]["status"]["containerStatuses"][0]["restartCount"] == 1,
        what="one in-place restart",
    )
    jobs.exit("ip-worker-0", 1)
    job = jobs.wait_condition("PyTorchJob", "ip", "Failed")
    assert condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    jobs.wait_pods("ip", lambda p: not p, what="the job's running pods stopped")
