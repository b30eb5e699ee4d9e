"""JAXJob on the local control plane (kwok pods): every upstream training-operator v1.9.0
example from creation to Succeeded, with the children and environment upstream's
controller gives them, and upstream's own v1 SDK (``kubeflow-training``, unmodified, in its
own virtualenv) creating, reading, waiting for and deleting one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import keys as K
from kubetrain.manifest import parse_yaml
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of
from tests.integration.sdk import run_sdk

UPSTREAM = Path(__file__).parents[2] / "data/upstream/training-operator-v1.9.0/jax"
EXAMPLES = sorted(p.relative_to(UPSTREAM).as_posix() for p in UPSTREAM.rglob("*.yaml"))
KIND = "JAXJob"


def _upstream(example: str, namespace: str) -> dict[str, Any]:
    """An upstream example, unchanged but for its namespace (``kubeflow``): the test's."""
    job: dict[str, Any] = parse_yaml((UPSTREAM / example).read_text(encoding="utf-8"))
    job["metadata"]["namespace"] = namespace
    return job


def _expected_env(name: str, index: int) -> list[dict[str, str]]:
    """What upstream's ``setPodEnv`` appends, in its order (envvar.go)."""
    return [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "COORDINATOR_PORT", "value": "6666"},
        {"name": "COORDINATOR_ADDRESS", "value": f"{name}-worker-0"},
        {"name": "NUM_PROCESSES", "value": "2"},
        {"name": "PROCESS_ID", "value": str(index)},
    ]


@pytest.mark.parametrize("example", EXAMPLES)
def test_upstream_jaxjob_runs_to_success(
    operator: RunningOperator, jobs: Jobs, namespace: str, example: str
) -> None:
    job = jobs.create(_upstream(example, namespace))
    name = job["metadata"]["name"]
    workers = {f"{name}-worker-0", f"{name}-worker-1"}
    pods = jobs.wait_running(name, workers)
    running = jobs.wait_condition(KIND, name, "Running")
    assert running["status"]["replicaStatuses"]["Worker"]["active"] == 2

    services = jobs.services(name)
    assert set(services) == workers
    for index in (0, 1):
        pod_name = f"{name}-worker-{index}"
        pod = pods[pod_name]
        assert pod["metadata"]["labels"] == {
            K.OPERATOR_NAME: "jaxjob-controller",
            K.JOB_NAME: name,
            K.REPLICA_TYPE: "worker",
            K.REPLICA_INDEX: str(index),
            **({K.JOB_ROLE: "master"} if index == 0 else {}),
        }
        (container,) = pod["spec"]["containers"]
        assert container["name"] == "jax"
        assert container["ports"] == [
            {"name": "jaxjob-port", "containerPort": 6666, "protocol": "TCP"}
        ]
        assert container["env"] == _expected_env(name, index)
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        service = services[pod_name]["spec"]
        assert service["clusterIP"] == "None"
        assert [(p["name"], p["port"]) for p in service["ports"]] == [("jaxjob-port", 6666)]

    # Every Worker decides: Worker 0 done is not yet success.
    jobs.exit(f"{name}-worker-0", 0)
    jobs.wait(
        KIND,
        name,
        lambda j: (j or {})["status"]["replicaStatuses"]["Worker"].get("succeeded") == 1,
        what="worker 0 counted succeeded",
    )
    assert jobs.state(KIND, name) == "Running"
    jobs.exit(f"{name}-worker-1", 0)
    done = jobs.wait_condition(KIND, name, "Succeeded")
    assert (condition(done, "Running") or {}).get("status") == "False"
    assert done["status"]["completionTime"]
    assert done["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    # Upstream's Event reason on success.
    jobs.wait_event(name, "JAXJobSucceeded")


def test_a_failed_worker_with_restart_policy_never_fails_the_jaxjob(
    operator: RunningOperator, jobs: Jobs, namespace: str
) -> None:
    job = _upstream("cpu-demo/demo.yaml", namespace)
    job["metadata"]["name"] = "jaxfail"
    del job["spec"]["jaxReplicaSpecs"]["Worker"]["restartPolicy"]  # upstream's default: Never
    jobs.create(job)
    jobs.wait_running("jaxfail", {"jaxfail-worker-0", "jaxfail-worker-1"})
    jobs.exit("jaxfail-worker-1", 1)
    failed = jobs.wait_condition(KIND, "jaxfail", "Failed")
    assert failed["status"]["replicaStatuses"]["Worker"]["failed"] == 1
    assert jobs.state(KIND, "jaxfail") == "Failed"


class Sdk:
    """Upstream's v1 SDK (``TrainingClient(job_kind="JAXJob")``), unmodified."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.base = ["--kubeconfig", str(kubeconfig), "--namespace", namespace]
        self.base += ["--job-kind", KIND]

    def __call__(self, call: str, *args: str) -> Any:
        return run_sdk("training_v1", *self.base, call, *args)


def test_the_v1_sdk_creates_waits_for_and_deletes_a_jaxjob(
    operator: RunningOperator, jobs: Jobs, kubeconfig: Path, namespace: str
) -> None:
    """Upstream's SDK e2e flow for JAXJob (``test_e2e_jaxjob.py``): ``create_job`` with the
    SDK's ``KubeflowOrgV1JAXJob``, ``get_job``, ``wait_for_job_conditions``, ``delete_job``."""
    sdk = Sdk(kubeconfig, namespace)
    name = "jaxjob-cpu-ci-test"
    assert sdk("create-jaxjob", "--name", name) == {"created": name}
    workers = [f"{name}-worker-0", f"{name}-worker-1"]
    jobs.wait_running(name, set(workers))
    jobs.wait_condition(KIND, name, "Running")
    got = sdk("get-job", "--name", name)
    assert (got["model"], got["kind"], got["name"]) == ("KubeflowOrgV1JAXJob", KIND, name)
    assert "Running" in got["conditions"]
    assert sdk("get-job-pod-names", "--name", name, "--is-master") == [workers[0]]
    assert sorted(sdk("get-job-pod-names", "--name", name, "--replica-type", "worker")) == workers
    for index, worker in enumerate(workers):
        pod = jobs.pods(name)[worker]
        env = env_of(pod, "jax")
        assert (env["PROCESS_ID"], env["NUM_PROCESSES"]) == (str(index), "2")
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {
            "cpu": "1200m",
            "memory": "3Gi",
        }
        jobs.exit(worker, 0)
    verdict = sdk("wait-for-job-conditions", "--name", name)
    # upstream's verify_job_e2e: Created and Succeeded, nothing else True.
    assert verdict["created"] and verdict["succeeded"]
    assert not (verdict["running"] or verdict["failed"] or verdict["restarting"])
    assert sdk("delete-job", "--name", name) == {"deleted": name}
    wait_for(lambda: jobs.get(KIND, name), lambda j: j is None, what="the JAXJob deleted")
