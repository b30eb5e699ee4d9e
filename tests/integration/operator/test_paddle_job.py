"""PaddleJob on the local control plane (kwok's fake pods): upstream's examples from
creation to Succeeded with upstream v1.9's environment on every pod, parameter-server
mode (the Master decides), and upstream's v1 SDK (``kubeflow-training``) creating,
reading, waiting for and deleting a PaddleJob."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import PaddleJob, load_job
from kubetrain.api import keys as K
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import GPU_TOLERATION
from tests.conftest import REPO_ROOT
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs
from tests.integration.sdk import run_sdk

KIND = "PaddleJob"
UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "paddlepaddle"
EXAMPLES = sorted(UPSTREAM.glob("*.yaml"))


def upstream_example(path: Path) -> dict[str, Any]:
    """The example as published, in the test's namespace (the request's namespace decides)
    and, where it asks for GPUs, tolerating the fake GPU nodes' taint."""
    wire: dict[str, Any] = parse_yaml(path.read_text())
    assert isinstance(load_job(wire, str(path)), PaddleJob)
    wire["metadata"].pop("namespace")
    for spec in wire["spec"]["paddleReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        limits = pod["containers"][0].get("resources", {}).get("limits", {})
        if K.GPU_RESOURCE in limits:
            pod["tolerations"] = [GPU_TOLERATION]
    return wire


def env_items(pod: dict[str, Any], container: str = "paddle") -> list[dict[str, Any]]:
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return list(main.get("env") or [])


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_upstream_example_runs_to_succeeded_with_upstreams_environment(
    operator: RunningOperator, jobs: Jobs, path: Path
) -> None:
    job = upstream_example(path)
    name = job["metadata"]["name"]
    jobs.create(job)
    worker0, worker1 = f"{name}-worker-0", f"{name}-worker-1"
    pods = jobs.wait_running(name, {worker0, worker1})
    assert env_items(pods[worker0]) == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": name},
        {"name": "PADDLE_NNODES", "value": "2"},
        {
            "name": "POD_IP_DUMMY",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
        },
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):37777"},
    ]
    assert env_items(pods[worker1])[-1] == {"name": "PADDLE_MASTER", "value": f"{worker0}:37777"}
    for pod_name, pod in pods.items():
        labels = pod["metadata"]["labels"]
        assert labels[K.OPERATOR_NAME] == "paddlejob-controller"
        assert labels[K.REPLICA_TYPE] == "worker"
        assert K.JOB_ROLE not in labels, f"{pod_name}: upstream gives Workers no role"
    services = jobs.services(name)
    assert set(services) == {worker0, worker1}
    assert [p["port"] for p in services[worker0]["spec"]["ports"]] == [37777]

    jobs.exit(worker0, 0)
    jobs.wait_pods(
        name,
        lambda p: p[worker0]["status"]["phase"] == "Succeeded",
        what=f"{worker0} Succeeded",
    )
    # Without a Master every Worker decides: one is not enough.
    assert jobs.state(KIND, name) == "Running"
    jobs.exit(worker1, 0)
    done = jobs.wait_condition(KIND, name, "Succeeded")
    assert (condition(done, "Succeeded") or {})["reason"] == "PaddleJobSucceeded"
    assert done["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2


def test_parameter_server_mode_the_master_decides(operator: RunningOperator, jobs: Jobs) -> None:
    job = upstream_example(UPSTREAM / "simple-cpu.yaml")
    job["metadata"]["name"] = "ps"
    worker = job["spec"]["paddleReplicaSpecs"]["Worker"]
    job["spec"]["paddleReplicaSpecs"]["Master"] = {"replicas": 1, "template": worker["template"]}
    jobs.create(job)
    pods = jobs.wait_running("ps", {"ps-master-0", "ps-worker-0", "ps-worker-1"})
    master_env = env_items(pods["ps-master-0"])
    assert master_env[-2:] == [
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):37777"},
        {"name": "PADDLE_SERVER_NUM", "value": "1"},
    ]
    assert env_items(pods["ps-worker-0"])[2:] == [
        {"name": "PADDLE_NNODES", "value": "3"},
        {"name": "PADDLE_MASTER", "value": "ps-master-0:37777"},
        {"name": "PADDLE_TRAINER_NUM", "value": "1"},
    ]
    assert pods["ps-master-0"]["metadata"]["labels"][K.JOB_ROLE] == "master"
    jobs.exit("ps-master-0", 0)
    jobs.wait_condition(KIND, "ps", "Succeeded")


def test_upstreams_sdk_creates_waits_for_and_deletes_a_paddlejob(
    operator: RunningOperator, jobs: Jobs, kubeconfig: Path, namespace: str
) -> None:
    """upstream's ``TrainingClient(job_kind="PaddleJob")`` flow (its e2e test's): create
    from the models, get, wait for Succeeded, delete."""
    base = ["--kubeconfig", str(kubeconfig), "--namespace", namespace, "--job-kind", KIND]

    def sdk(*args: str) -> Any:
        return run_sdk("training_v1", *base, *args)

    example = str(UPSTREAM / "simple-cpu.yaml")
    assert sdk("create-paddlejob-from-file", "--file", example) == {"created": "paddle-simple-cpu"}
    name = "paddle-simple-cpu"
    jobs.wait_running(name, {f"{name}-worker-0", f"{name}-worker-1"})
    got = sdk("get-job", "--name", name)
    assert (got["kind"], got["name"], got["replicas"]) == (KIND, name, {"Worker": 2})
    assert "Created" in got["conditions"]
    for index in (0, 1):
        jobs.exit(f"{name}-worker-{index}", 0)
    verdict = sdk("wait-for-job-conditions", "--name", name)
    assert verdict["created"] and verdict["succeeded"]
    assert not (verdict["running"] or verdict["failed"] or verdict["restarting"])
    assert sdk("delete-job", "--name", name) == {"deleted": name}
    wait_for(lambda: jobs.get(KIND, name), lambda j: j is None, what=f"{name} deleted")
