"""JAX: the TrainJob policy's declaration (its environment's values:
``test_trainjob_env``) and the JAXJob framework's rules, against upstream's examples."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import JAXJob, apply_defaults, load_job
from kubetrain.api import env_names as E
from kubetrain.api.trainer import constants as T
from kubetrain.frameworks import ClusterAddressing, EnvVar, LocalAddressing, framework_for, jax
from kubetrain.frameworks.policy import RENDEZVOUS_PORT
from kubetrain.manifest import parse_yaml
from tests.conftest import REPO_ROOT
from tests.unit.frameworks.test_trainjob_env import job


def test_policy_serves_the_coordinator_port_and_reserves_nothing() -> None:
    assert jax.POLICY.name == "jax"
    assert jax.POLICY.rank_port == RENDEZVOUS_PORT
    assert jax.POLICY.reserved_env == ()


def test_env_names_are_the_modules_constants() -> None:
    resolved = job({"jax": {}}, numNodes=2)
    env = jax.POLICY.container_env(resolved, "node", T.NODE, 0, ClusterAddressing())
    assert [var["name"] for var in env] == [
        E.JAX_NUM_PROCESSES,
        E.JAX_PROCESS_ID,
        E.JAX_COORDINATOR_ADDRESS,
    ]


def test_rejects_containers_but_the_trainers_node() -> None:
    resolved = job({"jax": {}}, numNodes=2)
    assert jax.POLICY.container_env(resolved, "node", "sidecar", 0, ClusterAddressing()) == []


# -- JAXJob (training-operator v1.9.0's pkg/controller.v1/jax/envvar.go) ---------------------

UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "jax"


def upstream_job(path: str, **spec: Any) -> JAXJob:
    """An upstream example, defaulted as the operator sees it."""
    doc = parse_yaml((UPSTREAM / path).read_text())
    doc["spec"].update(spec)
    job = apply_defaults(load_job(doc))
    assert isinstance(job, JAXJob)
    return job


def container_env(job: JAXJob, index: int, name: str = "jax") -> list[EnvVar]:
    container = {"name": name, "image": "x"}
    return jax.FRAMEWORK.container_env(job, "Worker", index, container, ClusterAddressing())


@pytest.mark.parametrize(
    "path", ["cpu-demo/demo.yaml", "jax-dist-spmd-mnist/jaxjob_dist_spmd_mnist_gloo.yaml"]
)
@pytest.mark.parametrize("index", [0, 1])
def test_jaxjob_env_of_each_worker_of_an_upstream_example(path: str, index: int) -> None:
    job = upstream_job(path)
    assert container_env(job, index) == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "COORDINATOR_PORT", "value": "6666"},
        {"name": "COORDINATOR_ADDRESS", "value": f"{job.name}-worker-0"},
        {"name": "NUM_PROCESSES", "value": "2"},
        {"name": "PROCESS_ID", "value": str(index)},
    ]


def test_jaxjob_env_goes_into_every_container() -> None:
    job = upstream_job("cpu-demo/demo.yaml")
    assert container_env(job, 1, name="sidecar") == container_env(job, 1)


def test_jaxjob_coordinator_port_is_the_declared_jaxjob_port() -> None:
    job = upstream_job("cpu-demo/demo.yaml")
    wire = job.to_wire()
    wire["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "jaxjob-port", "containerPort": 7777, "protocol": "TCP"}
    ]
    env = {v["name"]: v.get("value") for v in container_env(JAXJob.model_validate(wire), 0)}
    assert env["COORDINATOR_PORT"] == "7777"


def test_jaxjob_local_addressing_uses_loopback_and_worker_0s_port() -> None:
    job = upstream_job("cpu-demo/demo.yaml")
    local = LocalAddressing(ports={("Worker", 0): 40100, ("Worker", 1): 40101})
    env = jax.replica_env(job, "Worker", 1, local)
    assert {v["name"]: v.get("value") for v in env} == {
        "PYTHONUNBUFFERED": "1",
        "COORDINATOR_PORT": "40100",
        "COORDINATOR_ADDRESS": "127.0.0.1",
        "NUM_PROCESSES": "2",
        "PROCESS_ID": "1",
    }


def test_rejects_an_unknown_jaxjob_replica_type() -> None:
    with pytest.raises(ValueError, match="replica type 'Master' is not in JAXJob"):
        jax.replica_env(upstream_job("cpu-demo/demo.yaml"), "Master", 0, ClusterAddressing())


def test_rejects_another_kind() -> None:
    pytorch = load_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "p"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Worker": {
                        "template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}
                    }
                }
            },
        }
    )
    with pytest.raises(TypeError, match=r"takes only JAXJobs \(got PyTorchJob\)"):
        jax.FRAMEWORK.succeeded(pytorch, lambda _t, _i: True)


def test_jaxjob_worker_0_is_the_master_and_nothing_waits() -> None:
    job = upstream_job("cpu-demo/demo.yaml")
    assert [jax.FRAMEWORK.role(job, "Worker", i) for i in range(2)] == ["master", None]
    assert jax.FRAMEWORK.start_order(job) == []
    assert jax.FRAMEWORK.run_container(job, "Worker") == "jax"
    assert framework_for("JAXJob") is jax.FRAMEWORK


@pytest.mark.parametrize(
    ("finished", "expected"),
    [
        ({0, 1, 2}, "all 3 workers completed"),
        ({0}, None),
        ({1, 2}, None),
        (set(), None),
    ],
    ids=["all", "worker-0-only", "all-but-worker-0", "none"],
)
def test_jaxjob_succeeds_when_every_worker_has(finished: set[int], expected: str | None) -> None:
    job = upstream_job("cpu-demo/demo.yaml")
    wire = job.to_wire()
    wire["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = 3
    three = JAXJob.model_validate(wire)
    assert jax.FRAMEWORK.succeeded(three, lambda t, i: t == "Worker" and i in finished) == expected
