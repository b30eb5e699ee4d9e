"""Run policies on real pods: activeDeadlineSeconds, ttlSecondsAfterFinished,
cleanPodPolicy, suspend/resume, the startup gate's timeout, managedBy, and a job whose
content the API server rejects."""

from __future__ import annotations

from datetime import datetime

import pytest

from kubetrain.api import keys as K
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of, mpi_job, pytorch_job


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_active_deadline_fails_the_job_and_stops_its_pods(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("late", workers=1, run_policy={"activeDeadlineSeconds": 2}))
    jobs.wait_running("late", {"late-master-0", "late-worker-0"})
    job = jobs.wait_condition("PyTorchJob", "late", "Failed", timeout=30)
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    # It fires on time (requeue-after), never before the deadline.
    elapsed = _time(failed["lastTransitionTime"]) - _time(job["status"]["startTime"])
    assert 2 <= elapsed.total_seconds() <= 10, elapsed
    jobs.wait_pods("late", lambda p: not p, what="the running pods deleted")


def test_ttl_deletes_a_finished_job_and_its_children(operator: RunningOperator, jobs: Jobs) -> None:
    jobs.create(pytorch_job("ttl", workers=1, run_policy={"ttlSecondsAfterFinished": 1}))
    jobs.wait_running("ttl", {"ttl-master-0", "ttl-worker-0"})
    jobs.exit("ttl-master-0", 0)
    jobs.wait("PyTorchJob", "ttl", lambda j: j is None, what="the job deleted by its TTL")
    jobs.wait_pods("ttl", lambda p: not p, what="its pods collected")
    expired = jobs.wait_event("ttl", "TTLExpired")
    succeeded = jobs.wait_event("ttl", "PyTorchJobSucceeded")
    # Deleted after it succeeded, not before.
    assert expired["lastTimestamp"] >= succeeded["lastTimestamp"]


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        ("All", set()),
        ("Running", {"cp-master-0", "cp-worker-1"}),
        ("None", {"cp-master-0", "cp-worker-0", "cp-worker-1"}),
    ],
)
def test_clean_pod_policy_on_success(
    operator: RunningOperator, jobs: Jobs, policy: str, left: set[str]
) -> None:
    """An explicit cleanPodPolicy acts at once, as upstream documents it: ``None`` keeps
    even the rank still running."""
    jobs.create(pytorch_job("cp", workers=2, run_policy={"cleanPodPolicy": policy}))
    jobs.wait_running("cp", {"cp-master-0", "cp-worker-0", "cp-worker-1"})
    jobs.exit("cp-worker-1", 0)
    jobs.wait_pods(
        "cp",
        lambda p: p["cp-worker-1"]["status"]["phase"] == "Succeeded",
        what="cp-worker-1 Succeeded",
    )
    jobs.exit("cp-master-0", 0)
    done = jobs.wait_condition("PyTorchJob", "cp", "Succeeded")
    # cp-worker-0 was still running: stopped under Running, kept under None; finished
    # pods stay (for their logs) unless the policy is All.
    pods = jobs.wait_pods("cp", lambda p: set(p) == left, what=f"pods {sorted(left)} left")
    phases = {name: p["status"]["phase"] for name, p in pods.items()}
    expected = {n: "Running" if n == "cp-worker-0" else "Succeeded" for n in left}
    assert phases == expected
    # Counted as it is: the rank still running (or stopped) is not reported succeeded.
    worker = done["status"]["replicaStatuses"]["Worker"]
    assert worker.get("succeeded", 0) == 1
    if policy == "None":
        assert worker.get("active", 0) == 1
    services = wait_for(
        lambda: set(jobs.services("cp")), lambda s: s == left, what=f"Services {sorted(left)}"
    )
    assert services == left


def test_suspend_and_resume_rebuilds_from_the_current_spec(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = pytorch_job("sus", workers=1, run_policy={"suspend": True})
    jobs.create(job)
    suspended = jobs.wait_condition("PyTorchJob", "sus", "Suspended")
    assert condition(suspended, "Suspended")["reason"] == "PyTorchJobSuspended"  # type: ignore[index]
    assert jobs.pods("sus") == {}
    assert "startTime" not in suspended["status"]

    # Resume with a changed template: the pods are built from the new spec.
    specs = job["spec"]["pytorchReplicaSpecs"]
    for spec in specs.values():
        spec["template"]["spec"]["containers"][0]["env"] = [{"name": "STAGE", "value": "two"}]
    jobs.patch(
        "PyTorchJob",
        "sus",
        {"spec": {"runPolicy": {"suspend": False}, "pytorchReplicaSpecs": specs}},
    )
    pods = jobs.wait_running("sus", {"sus-master-0", "sus-worker-0"})
    assert env_of(pods["sus-worker-0"])["STAGE"] == "two"
    resumed = jobs.wait_condition("PyTorchJob", "sus", "Suspended", status="False")
    assert condition(resumed, "Suspended")["reason"] == "PyTorchJobResumed"  # type: ignore[index]
    jobs.wait_condition("PyTorchJob", "sus", "Running")

    # Suspend a running job: its pods and Services go, Running turns False.
    jobs.patch("PyTorchJob", "sus", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_pods("sus", lambda p: not p, what="the pods deleted on suspend")
    job_now = jobs.wait_condition("PyTorchJob", "sus", "Running", status="False")
    assert condition(job_now, "Running")["reason"] == "PyTorchJobSuspended"  # type: ignore[index]
    assert wait_for(lambda: jobs.services("sus"), lambda s: not s, what="no Services") == {}


def test_suspended_mpijob_deletes_its_launcher_and_recreates_it_on_resume(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(mpi_job("msus", workers=1))
    jobs.wait_condition("MPIJob", "msus", "Running")
    (secret,) = jobs.secrets("msus").values()
    secret_uid = secret["metadata"]["uid"]
    jobs.patch("MPIJob", "msus", {"spec": {"runPolicy": {"suspend": True}}})
    jobs.wait_condition("MPIJob", "msus", "Suspended")
    wait_for(lambda: jobs.batch_jobs("msus"), lambda j: not j, what="the launcher Job deleted")
    jobs.wait_pods("msus", lambda p: not p, what="no pods while suspended")
    jobs.patch("MPIJob", "msus", {"spec": {"runPolicy": {"suspend": False}}})
    jobs.wait_condition("MPIJob", "msus", "Running")
    assert set(jobs.batch_jobs("msus")) == {"msus-launcher"}
    # The SSH key pair is generated once per job.
    (kept,) = jobs.secrets("msus").values()
    assert kept["metadata"]["uid"] == secret_uid


def test_startup_gate_times_out_with_the_reason(operator: RunningOperator, jobs: Jobs) -> None:
    job = pytorch_job("stuck", workers=2, annotations={K.STARTUP_TIMEOUT_ANNOTATION: "2"})
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    master["resources"]["limits"]["nvidia.com/gpu"] = "1000"  # no node has that many
    jobs.create(job)
    done = jobs.wait_condition("PyTorchJob", "stuck", "Failed", timeout=30)
    failed = condition(done, "Failed")
    assert failed is not None and failed["reason"] == "StartupTimeout"
    assert "Unschedulable" in failed["message"] and "stuck-master-0" in failed["message"]
    # The workers never started, and the pending master was stopped.
    jobs.wait_pods("stuck", lambda p: not p, what="no pods left")
    assert not any(e["reason"] == "PyTorchJobRunning" for e in jobs.events("stuck"))
    unschedulable = jobs.wait_event("stuck", "Unschedulable")
    assert "stuck-master-0" in unschedulable["message"]


def test_a_job_managed_by_another_controller_is_left_alone(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(
        pytorch_job("theirs", workers=1, run_policy={"managedBy": "kueue.x-k8s.io/multikueue"})
    )
    jobs.create(pytorch_job("ours", workers=1))
    jobs.wait_condition("PyTorchJob", "ours", "Running")
    # The operator has worked through the namespace: the other job got nothing.
    theirs = jobs.get("PyTorchJob", "theirs")
    assert theirs is not None and "status" not in theirs
    assert jobs.pods("theirs") == {} and jobs.services("theirs") == {}


def test_a_job_the_api_server_rejects_fails_with_a_reason(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = pytorch_job("invalid", workers=1)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        # Accepted by the CRD schema, rejected when a pod is created: requests > limits.
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "2"},
            "limits": {"cpu": "1"},
        }
    jobs.create(job)
    done = jobs.wait_condition("PyTorchJob", "invalid", "Failed")
    failed = condition(done, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "must be less than or equal to cpu limit" in failed["message"]
    # The operator carries on with other jobs.
    jobs.create(pytorch_job("valid", workers=1))
    jobs.wait_condition("PyTorchJob", "valid", "Running")
    assert operator.operator.healthz()[0]
