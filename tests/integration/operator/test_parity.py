"""Drop-in parity with Kubeflow v1 (training-operator v1.9, mpi-operator v0.8) where users
and their tools notice it: upstream's own SDK (``kubeflow-training``, in its own
virtualenv) driving the operator, MPI host names for Intel MPI and MPICH, the launcher
creation policy, cleanPodPolicy and the status counts, managedBy, TTL, startTime and
upstream's Events."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.api import keys as K
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job
from tests.integration.operator.running import SharedOperator
from tests.integration.sdk import run_sdk

#: A node label no fake node has until a test puts it on one (workers wait on it).
LATE_POOL = "kubetrain.dev/test-late-pool"


class Sdk:
    """Upstream's v1 SDK (``TrainingClient``), unmodified, in its own virtualenv."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.base = ["--kubeconfig", str(kubeconfig), "--namespace", namespace]

    def __call__(self, call: str, *args: str) -> Any:
        return run_sdk("training_v1", *self.base, call, *args)


@pytest.fixture
def sdk(kubeconfig: Path, namespace: str) -> Sdk:
    return Sdk(kubeconfig, namespace)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _launcher_pod(jobs: Jobs, job: str) -> dict[str, Any]:
    (pod,) = [
        p for p in jobs.pods(job).values() if p["metadata"]["labels"].get(K.JOB_ROLE) == "launcher"
    ]
    return pod


# -- the SDK ---------------------------------------------------------------------------------


def test_sdk_create_job_from_a_function_keeps_every_pod(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk
) -> None:
    """Upstream's SDK end-to-end flow: ``create_job(train_func=..., num_workers=3)``, the
    job Succeeded with its Created and Succeeded conditions, then every pod still there.
    The master decides; the two workers finish a moment later, within kubetrain's grace
    period, and are counted as succeeded because they did."""
    sdk("create-job-from-function", "--name", "fn", "--num-workers", "3")
    jobs.wait_running("fn", {"fn-master-0", "fn-worker-0", "fn-worker-1"})
    jobs.exit("fn-master-0", 0)
    verdict = sdk("wait-for-job-conditions", "--name", "fn")
    # upstream's verify_job_e2e: Created and Succeeded, nothing else True.
    assert verdict["created"] and verdict["succeeded"]
    assert not (verdict["running"] or verdict["failed"] or verdict["restarting"])
    assert len(verdict["conditions"]) >= 2
    # The ranks still shutting down are not killed: upstream's check passes.
    pod_names = sdk("get-job-pod-names", "--name", "fn")
    assert sorted(pod_names) == ["fn-master-0", "fn-worker-0", "fn-worker-1"]
    running = jobs.pods("fn")
    assert running["fn-worker-0"]["status"]["phase"] == "Running"
    for worker in ("fn-worker-0", "fn-worker-1"):
        jobs.exit(worker, 0)
    done = jobs.wait(
        "PyTorchJob",
        "fn",
        lambda j: (
            ((j or {}).get("status", {}).get("replicaStatuses", {}).get("Worker") or {}).get(
                "succeeded"
            )
            == 2
        ),
        what="both workers counted succeeded once they exited",
    )
    assert done is not None
    assert done["status"]["replicaStatuses"]["Worker"].get("active", 0) == 0
    assert set(jobs.pods("fn")) == {"fn-master-0", "fn-worker-0", "fn-worker-1"}
    assert sdk("get-job-pod-names", "--name", "fn", "--is-master") == ["fn-master-0"]


def test_a_worker_only_pytorchjob_labels_worker_0_master(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk
) -> None:
    """Without a Master, Worker 0 carries ``job-role=master``: the SDK's ``get_job_logs``
    and ``is_master`` look for it."""
    jobs.create(pytorch_job("wo", workers=2, master=False))
    jobs.wait_running("wo", {"wo-worker-0", "wo-worker-1"})
    assert sdk("get-job-pod-names", "--name", "wo", "--is-master") == ["wo-worker-0"]
    workers = sdk("get-job-pod-names", "--name", "wo", "--replica-type", "worker")
    assert sorted(workers) == ["wo-worker-0", "wo-worker-1"]


# -- cleanPodPolicy unset: the grace period, and counts that stay true --------------------------


def test_ranks_still_running_after_the_grace_period_are_stopped_not_counted_succeeded(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = pytorch_job("grace", workers=2)
    job["metadata"]["annotations"] = {K.SUCCESS_GRACE_ANNOTATION: "2"}
    jobs.create(job)
    jobs.wait_running("grace", {"grace-master-0", "grace-worker-0", "grace-worker-1"})
    jobs.exit("grace-worker-1", 0)
    jobs.wait_pods(
        "grace",
        lambda p: p["grace-worker-1"]["status"]["phase"] == "Succeeded",
        what="grace-worker-1 Succeeded",
    )
    jobs.exit("grace-master-0", 0)
    succeeded = jobs.wait_condition("PyTorchJob", "grace", "Succeeded")
    completed = _time(succeeded["status"]["completionTime"])
    # grace-worker-0 never exits by itself: it is stopped once its 2 s are up.
    jobs.wait_pods(
        "grace",
        lambda p: set(p) == {"grace-master-0", "grace-worker-1"},
        what="the stuck rank stopped after its grace period",
        timeout=30,
    )
    stopped_after = (datetime.now(completed.tzinfo) - completed).total_seconds()
    assert stopped_after >= 2, stopped_after
    final = jobs.wait(
        "PyTorchJob",
        "grace",
        lambda j: (j or {})["status"]["replicaStatuses"]["Worker"].get("active", 0) == 0,
        what="no active worker counted",
    )
    assert final is not None
    worker = final["status"]["replicaStatuses"]["Worker"]
    # One rank finished by itself, one was stopped: not 2 succeeded, as upstream reports.
    assert worker.get("succeeded", 0) == 1 and worker.get("failed", 0) == 0


# -- MPI: host names, DNS search, the launcher creation policy, TTL ---------------------------


@pytest.fixture
def late_pool(core_v1: client.CoreV1Api) -> Iterator[str]:
    """A fake node that can be given ``LATE_POOL`` when a test wants its workers placed;
    the label is removed afterwards."""
    found: Any = core_v1.list_node(label_selector="type=kwok", _preload_content=False)
    nodes = json.loads(found.data)["items"]
    gpu = [n for n in nodes if K.GPU_RESOURCE in n["status"].get("allocatable", {})]
    node = str((gpu or nodes)[0]["metadata"]["name"])
    yield node
    core_v1.patch_node(node, {"metadata": {"labels": {LATE_POOL: None}}})


def _intel_mpi_job(name: str, *, launcher_runs_ranks: bool = False) -> dict[str, Any]:
    job = mpi_job(name, workers=2, slots=2)
    job["spec"]["mpiImplementation"] = "Intel"
    job["spec"]["runLauncherAsWorker"] = launcher_runs_ranks
    return job


def test_intel_mpi_launcher_and_workers_reach_each_other_by_name(
    operator: RunningOperator, jobs: Jobs, namespace: str
) -> None:
    jobs.create(_intel_mpi_job("impi", launcher_runs_ranks=True))
    jobs.wait_condition("MPIJob", "impi", "Running")
    launcher = _launcher_pod(jobs, "impi")
    assert (launcher["spec"]["hostname"], launcher["spec"]["subdomain"]) == (
        "impi-launcher",
        "impi",
    )
    search = f"impi.{namespace}.svc.cluster.local"
    for index in (0, 1):
        worker = jobs.pods("impi")[f"impi-worker-{index}"]
        assert search in worker["spec"]["dnsConfig"]["searches"]
        assert worker["metadata"]["labels"][K.REPLICA_INDEX] == str(index + 1)
    assert launcher["metadata"]["labels"][K.REPLICA_INDEX] == "0"
    config = jobs.config_maps("impi")["impi-config"]["data"]
    host = f"impi.{namespace}.svc"
    assert config["hostfile"] == (
        f"impi-launcher.{host}:2\nimpi-worker-0.{host}:2\nimpi-worker-1.{host}:2\n"
    )
    assert config["discover_hosts.sh"] == (
        f"#!/bin/sh\necho impi-launcher.{host}\necho impi-worker-0.{host}\n"
        f"echo impi-worker-1.{host}\n"
    )
    # Upstream's app label on every child but the pods.
    children = [
        *jobs.services("impi").values(),
        *jobs.config_maps("impi").values(),
        *jobs.secrets("impi").values(),
        *jobs.batch_jobs("impi").values(),
    ]
    assert len(children) == 4
    assert all(c["metadata"]["labels"]["app"] == "impi" for c in children)


def test_at_startup_the_launcher_job_exists_at_once_its_pod_gated_until_workers_are_ready(
    operator: RunningOperator, jobs: Jobs, core_v1: client.CoreV1Api, late_pool: str
) -> None:
    job = mpi_job("early", workers=2)
    job["spec"]["launcherCreationPolicy"] = "AtStartup"
    worker_spec = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    worker_spec["nodeSelector"] = {LATE_POOL: "yes"}
    jobs.create(job)
    launcher = wait_for(
        lambda: [
            p
            for p in jobs.pods("early").values()
            if p["metadata"]["labels"].get(K.JOB_ROLE) == "launcher"
        ],
        bool,
        what="the launcher pod, created with the workers",
    )[0]
    assert "early-launcher" in jobs.batch_jobs("early")
    assert launcher["spec"]["schedulingGates"] == [{"name": K.STARTUP_GATE}]
    time.sleep(2)  # the workers cannot be placed: the launcher stays gated
    held = _launcher_pod(jobs, "early")
    assert held["spec"].get("schedulingGates") == [{"name": K.STARTUP_GATE}]
    assert held["status"]["phase"] == "Pending"
    core_v1.patch_node(late_pool, {"metadata": {"labels": {LATE_POOL: "yes"}}})
    jobs.wait_condition("MPIJob", "early", "Running")
    released = _launcher_pod(jobs, "early")
    assert not released["spec"].get("schedulingGates")
    assert released["metadata"]["uid"] == launcher["metadata"]["uid"]  # the same pod
    jobs.exit(released["metadata"]["name"], 0)
    jobs.wait_condition("MPIJob", "early", "Succeeded")


def test_wait_for_workers_ready_creates_the_launcher_job_only_then(
    operator: RunningOperator, jobs: Jobs, core_v1: client.CoreV1Api, late_pool: str
) -> None:
    job = mpi_job("later", workers=1)
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {
        LATE_POOL: "yes"
    }
    jobs.create(job)
    jobs.wait_pods("later", lambda p: "later-worker-0" in p, what="the worker created")
    time.sleep(2)
    assert jobs.batch_jobs("later") == {}
    core_v1.patch_node(late_pool, {"metadata": {"labels": {LATE_POOL: "yes"}}})
    jobs.wait_condition("MPIJob", "later", "Running")
    launcher = jobs.batch_jobs("later")["later-launcher"]
    assert not launcher["spec"]["template"]["spec"].get("schedulingGates")


def test_an_mpijob_ttl_removes_the_launcher_job_and_keeps_the_mpijob(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = mpi_job("mttl", workers=1)
    job["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 1}
    jobs.create(job)
    jobs.wait_condition("MPIJob", "mttl", "Running")
    jobs.exit(_launcher_pod(jobs, "mttl")["metadata"]["name"], 0)
    jobs.wait_condition("MPIJob", "mttl", "Succeeded")
    wait_for(lambda: jobs.batch_jobs("mttl"), lambda j: not j, what="the launcher Job deleted")
    time.sleep(1)
    kept = jobs.get("MPIJob", "mttl")
    assert kept is not None and (condition(kept, "Succeeded") or {}).get("status") == "True"


# -- managedBy, startTime, Events, messages ---------------------------------------------------


def test_a_job_left_to_another_controller_gets_one_event_even_across_restarts(
    operator: RunningOperator, shared_operator: SharedOperator, jobs: Jobs
) -> None:
    """The shared operator, then a new one in its place (it reads the job afresh): one
    Event between them."""
    jobs.create(pytorch_job("mk", workers=1, run_policy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    jobs.wait_event("mk", "ManagedByOtherController")
    time.sleep(1)
    operator.stop()
    assert shared_operator.get() is not operator
    jobs.wait_event("mk", "ManagedByOtherController")
    time.sleep(1)
    events = [e for e in jobs.events("mk") if e["reason"] == "ManagedByOtherController"]
    assert len(events) == 1
    assert "kueue.x-k8s.io/multikueue" in events[0]["message"]
    theirs = jobs.get("PyTorchJob", "mk")
    assert theirs is not None and "status" not in theirs


def test_start_time_is_kept_while_suspended_and_reset_on_resume(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("st", workers=1))
    running = jobs.wait_condition("PyTorchJob", "st", "Running")
    started = running["status"]["startTime"]
    jobs.patch("PyTorchJob", "st", {"spec": {"runPolicy": {"suspend": True}}})
    suspended = jobs.wait_condition("PyTorchJob", "st", "Suspended")
    assert suspended["status"]["startTime"] == started
    time.sleep(1.1)  # startTime has a one-second resolution
    jobs.patch("PyTorchJob", "st", {"spec": {"runPolicy": {"suspend": False}}})
    resumed = jobs.wait_condition("PyTorchJob", "st", "Suspended", status="False")
    assert _time(resumed["status"]["startTime"]) > _time(started)


def test_upstream_events_for_children_bounded_for_a_large_job(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("ev", workers=30, gpus=0))
    jobs.wait_condition("PyTorchJob", "ev", "Running", timeout=90)
    jobs.exit("ev-worker-3", 0)
    exited = jobs.wait_event("ev", "ExitedWithCode")
    assert exited["message"] == f"Pod: {jobs.namespace}.ev-worker-3 exited with code 0"
    events = jobs.events("ev")
    pods = [e for e in events if e["reason"] == "SuccessfulCreatePod"]
    services = [e for e in events if e["reason"] == "SuccessfulCreateService"]
    # 31 pods and 31 Services in two Events: the job's Created Event names what its first
    # reconcile made (the Master, every Service), the Workers once the Master is Ready
    # are one SuccessfulCreatePod naming ten.
    assert services == []
    assert [e["message"] for e in pods] == [
        "Created 30 pods: " + ", ".join(f"ev-worker-{i}" for i in range(10)) + " and 20 more"
    ]
    [created] = [e for e in events if e["reason"] == "PyTorchJobCreated"]
    assert "Created pod: ev-master-0; 31 services: ev-master-0, ev-worker-0," in created["message"]


def test_failure_messages_name_the_job_and_the_replica_type(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("msg", workers=1, restart_policy="Never"))
    jobs.wait_running("msg", {"msg-master-0", "msg-worker-0"})
    jobs.exit("msg-worker-0", 2)
    done = jobs.wait_condition("PyTorchJob", "msg", "Failed")
    message = (condition(done, "Failed") or {})["message"]
    # What scripts grep for upstream, then kubetrain's precise cause.
    assert message.startswith("PyTorchJob msg is failed because 1 Worker replica(s) failed")
    assert "msg-worker-0" in message and "exit code 2" in message


def test_the_ssh_secret_is_labelled_and_its_key_pair_matches(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(mpi_job("sshl", workers=1))
    jobs.wait_condition("MPIJob", "sshl", "Running")
    (secret,) = jobs.secrets("sshl").values()
    assert secret["metadata"]["labels"]["app"] == "sshl"
    public = base64.b64decode(secret["data"]["ssh-publickey"]).decode()
    assert public.startswith("ecdsa-sha2-nistp521 ")
