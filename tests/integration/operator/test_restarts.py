"""The restart model on real pods: what each restartPolicy does with a failure, how
backoffLimit counts restarts, and that every path ends in a final state."""

from __future__ import annotations

from kubetrain.api import keys as K
from tests.integration.kube import condition, wait_for
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


def test_an_evicted_pod_is_an_infrastructure_restart_of_the_gang_or_the_pod(
    operator: RunningOperator, jobs: Jobs
) -> None:
    """Under restartPolicy Never and backoffLimit 0, an eviction (the kubelet's report) is
    not the program's failure: by default the whole gang restarts (the master would wait
    for the lost worker forever), counted as the job's first infrastructure restart; with
    infrastructure-restart-scope Pod only the pod is recreated, counted in
    infrastructureRestarts. Both jobs keep running (before #45: Failed, PyTorchJobEvicted)."""
    never = {"backoffLimit": 0}
    jobs.create(pytorch_job("evict", workers=1, restart_policy="Never", run_policy=never))
    pod_scope = {K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION: "Pod"}
    jobs.create(
        pytorch_job(
            "evict-pod", workers=1, restart_policy="Never", run_policy=never, annotations=pod_scope
        )
    )
    gang = jobs.wait_running("evict", {"evict-master-0", "evict-worker-0"})
    alone = jobs.wait_running("evict-pod", {"evict-pod-master-0", "evict-pod-worker-0"})
    jobs.evict("evict-worker-0")
    jobs.evict("evict-pod-worker-0")
    # The gang: both pods new, as attempt 1.
    jobs.wait_pods(
        "evict",
        lambda p: (
            set(p) == set(gang)
            and all(_uid(p[n]) != _uid(gang[n]) for n in gang)
            and all(x["metadata"]["labels"].get(K.ATTEMPT_LABEL) == "1" for x in p.values())
        ),
        what="the whole gang recreated as attempt 1",
    )
    event = jobs.wait_event("evict", "GangRestart")
    assert "Evicted: The node was low on resource" in event["message"]
    assert "infrastructure restarts used: 1 of 10" in event["message"]
    job = jobs.wait_condition("PyTorchJob", "evict", "Running")
    restart = job["status"]["gangRestart"]
    assert (restart["attempt"], restart["infrastructure"], restart["reason"]) == (1, 1, "Evicted")
    assert not any(s.get("restarts") for s in job["status"]["replicaStatuses"].values())
    # Pod scope: the master kept, the worker recreated.
    pods = jobs.wait_pods(
        "evict-pod",
        lambda p: (
            "evict-pod-worker-0" in p
            and _uid(p["evict-pod-worker-0"]) != _uid(alone["evict-pod-worker-0"])
        ),
        what="evict-pod-worker-0 recreated",
    )
    assert _uid(pods["evict-pod-master-0"]) == _uid(alone["evict-pod-master-0"])
    event = jobs.wait_event("evict-pod", "Evicted")
    assert "infrastructure restarts used: 1 of 10, backoffLimit untouched" in event["message"]
    job = jobs.wait_condition("PyTorchJob", "evict-pod", "Running")
    worker = job["status"]["replicaStatuses"]["Worker"]
    assert worker["infrastructureRestarts"] == 1 and "restarts" not in worker, worker


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


def _restart_messages(jobs: Jobs, name: str) -> list[str]:
    return [e["message"] for e in jobs.events(name) if "restarts used:" in e["message"]]


def _wait_restart_messages(jobs: Jobs, name: str, count: int) -> list[str]:
    return wait_for(
        lambda: _restart_messages(jobs, name),
        lambda messages: len(messages) >= count,
        what=f"{count} restart Event(s) about {name}",
    )


def _wait_restart_count(jobs: Jobs, job: str, pod: str, count: int) -> None:
    jobs.wait_pods(
        job,
        lambda p: p[pod]["status"]["containerStatuses"][0]["restartCount"] == count,
        what=f"{pod}'s in-place restart {count}",
    )


def test_on_failure_words_each_in_place_restart_once_and_never_above_the_limit(
    operator: RunningOperator, jobs: Jobs
) -> None:
    """backoffLimit 2: two in-place restarts are allowed and worded "1 of 2", "2 of 2";
    the third exit is the BackoffLimitExceeded failure, with no "3 of 2" before it."""
    jobs.create(
        pytorch_job("lim", workers=1, restart_policy="OnFailure", run_policy={"backoffLimit": 2})
    )
    jobs.wait_running("lim", {"lim-master-0", "lim-worker-0"})
    worded: list[str] = []
    for count in (1, 2):
        jobs.exit("lim-worker-0", 1)
        seen = _wait_restart_messages(jobs, "lim", count)
        worded += [m for m in seen if m not in worded]
    jobs.exit("lim-worker-0", 1)
    job = jobs.wait_condition("PyTorchJob", "lim", "Failed")
    failure = jobs.wait_event("lim", "BackoffLimitExceeded")
    # Events are sent in order: any Event queued before the failure's is recorded by now.
    worded += [m for m in _restart_messages(jobs, "lim") if m not in worded]
    restarted = (
        "PyTorchJob lim is restarting because 1 Worker replica(s) failed: pod lim-worker-0 "
        "restarted a container (container pytorch exit code 1 (Error)); restarts used: {} of 2."
    )
    assert worded == [restarted.format(1), restarted.format(2)]
    expected_failure = (
        "PyTorchJob lim is failed because 1 Worker replica(s) failed and backoffLimit 2 is "
        "used up: pod lim-worker-0 failed (container pytorch exit code 1 (Error)). Raise "
        "spec.runPolicy.backoffLimit to allow more restarts."
    )
    assert failure["type"] == "Warning" and failure["message"] == expected_failure
    failed = condition(job, "Failed")
    assert failed is not None and failed["message"] == expected_failure


def test_in_place_restarts_in_quick_succession_are_each_counted_once(
    operator: RunningOperator, jobs: Jobs
) -> None:
    """Exits requested as fast as the fake kubelet takes them (the operator may see two
    restarts in one look): still one Event per restart, numbered 1 and 2, then the
    failure."""
    jobs.create(
        pytorch_job("fast", workers=1, restart_policy="OnFailure", run_policy={"backoffLimit": 2})
    )
    jobs.wait_running("fast", {"fast-master-0", "fast-worker-0"})
    for count in (1, 2, 3):
        jobs.exit("fast-worker-0", 1)
        if count < 3:
            _wait_restart_count(jobs, "fast", "fast-worker-0", count)
    jobs.wait_condition("PyTorchJob", "fast", "Failed")
    jobs.wait_event("fast", "BackoffLimitExceeded")
    used = sorted(m.rsplit("restarts used: ", 1)[1] for m in _restart_messages(jobs, "fast"))
    assert used == ["1 of 2.", "2 of 2."]
