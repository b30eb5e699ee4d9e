"""XGBoost: the TrainJob policy's declaration (its environment's values:
``test_trainjob_env``), and the XGBoostJob framework's env contract (upstream's
``SetPodEnv``), roles, start order and success rule."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import XGBoostJob, apply_defaults, load_job, load_job_file
from kubetrain.api.trainer import constants as T
from kubetrain.frameworks import ClusterAddressing, LocalAddressing, framework_for, xgboost
from kubetrain.frameworks.policy import RENDEZVOUS_PORT
from tests.conftest import REPO_ROOT
from tests.unit.frameworks.test_trainjob_env import job


def test_policy_serves_the_tracker_port_and_reserves_its_env() -> None:
    assert xgboost.POLICY.name == "xgboost"
    assert xgboost.POLICY.rank_port == RENDEZVOUS_PORT
    resolved = job({"xgboost": {}}, numNodes=2)
    env = xgboost.POLICY.container_env(resolved, "node", T.NODE, 1, ClusterAddressing())
    assert tuple(var["name"] for var in env) == xgboost.POLICY.reserved_env


def test_workers_are_one_per_gpu() -> None:
    limits = {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}
    assert xgboost.workers(job({"xgboost": {}}, numNodes=3, **limits)) == 12
    assert xgboost.workers(job({"xgboost": {}}, numNodes=3)) == 3


def test_rejects_containers_but_the_trainers_node() -> None:
    resolved = job({"xgboost": {}}, numNodes=2)
    assert xgboost.POLICY.container_env(resolved, "node", "sidecar", 0, ClusterAddressing()) == []


# -- XGBoostJob (kubeflow.org/v1) ---------------------------------------------------------

UPSTREAM = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/xgboost"
CLUSTER = ClusterAddressing()


def upstream_job(name: str = "xgboostjob.yaml") -> XGBoostJob:
    """An upstream example, defaulted as the operator reconciles it."""
    job = apply_defaults(load_job_file(UPSTREAM / name))
    assert isinstance(job, XGBoostJob)
    return job


def small_job(workers: int | None, port: dict[str, Any] | None = None) -> XGBoostJob:
    container: dict[str, Any] = {"name": "xgboost", "image": "xgb:1"}
    if port is not None:
        container["ports"] = [port]
    pod = {"spec": {"containers": [container, {"name": "sidecar", "image": "s:1"}]}}
    specs: dict[str, Any] = {"Master": {"replicas": 1, "template": pod}}
    if workers is not None:
        specs["Worker"] = {"replicas": workers, "template": pod}
    wire = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": "xgb", "namespace": "team"},
        "spec": {"xgbReplicaSpecs": specs},
    }
    job = apply_defaults(load_job(wire))
    assert isinstance(job, XGBoostJob)
    return job


def env_of(job: XGBoostJob, rtype: str, index: int, container: str = "xgboost") -> list[Any]:
    return [
        (var["name"], var["value"])
        for var in xgboost.FRAMEWORK.container_env(job, rtype, index, {"name": container}, CLUSTER)
    ]


TF_POD = {"spec": {"containers": [{"name": "tensorflow", "image": "t"}]}}
WORKERS = "xgboost-dist-iris-test-train-worker-0,xgboost-dist-iris-test-train-worker-1"


@pytest.mark.parametrize(
    ("rtype", "index", "rank"), [("Master", 0, "0"), ("Worker", 0, "1"), ("Worker", 1, "2")]
)
def test_env_of_each_replica_of_upstreams_example(rtype: str, index: int, rank: str) -> None:
    """examples/xgboost/xgboostjob.yaml: Master x1 and Worker x2, port 9991 declared."""
    assert env_of(upstream_job(), rtype, index) == [
        ("MASTER_PORT", "9991"),
        ("MASTER_ADDR", "xgboost-dist-iris-test-train-master-0"),
        ("WORLD_SIZE", "3"),
        ("RANK", rank),
        ("PYTHONUNBUFFERED", "1"),
        ("WORKER_PORT", "9991"),
        ("WORKER_ADDRS", WORKERS),
    ]


def test_every_container_gets_the_env() -> None:
    job = upstream_job()
    assert env_of(job, "Worker", 1, "sidecar") == env_of(job, "Worker", 1)


def test_a_master_alone_gets_no_worker_env_and_the_default_port() -> None:
    assert env_of(small_job(None), "Master", 0) == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "xgb-master-0"),
        ("WORLD_SIZE", "1"),
        ("RANK", "0"),
        ("PYTHONUNBUFFERED", "1"),
    ]


def test_ports_come_from_each_types_xgboostjob_port() -> None:
    job = small_job(3, {"name": "xgboostjob-port", "containerPort": 7000})
    env = dict(env_of(job, "Worker", 2))
    assert (env["MASTER_PORT"], env["WORKER_PORT"], env["RANK"]) == ("7000", "7000", "3")
    assert env["WORKER_ADDRS"] == "xgb-worker-0,xgb-worker-1,xgb-worker-2"


def test_local_addressing_uses_loopback_and_the_given_ports() -> None:
    local = LocalAddressing(ports={("Master", 0): 41000, ("Worker", 0): 41001})
    env = xgboost.FRAMEWORK.container_env(small_job(2), "Worker", 1, {}, local)
    values = {var["name"]: var["value"] for var in env}
    assert values["MASTER_ADDR"] == "127.0.0.1" and values["MASTER_PORT"] == "41000"
    assert values["WORKER_ADDRS"] == "127.0.0.1,127.0.0.1" and values["WORKER_PORT"] == "41001"


def test_roles_start_order_and_success_rule() -> None:
    job = upstream_job()
    framework = xgboost.FRAMEWORK
    assert framework.role(job, "Master", 0) == "master"
    assert framework.role(job, "Worker", 0) is None
    assert framework.run_container(job, "Worker") == "xgboost"
    (order,) = framework.start_order(job)
    assert order.waiting == ("Worker",) and order.needed == (("Master", 0),)
    assert framework.start_order(small_job(None)) == []
    # Upstream: the Master's success is the job's; the Workers' state does not matter.
    assert framework.succeeded(job, lambda rtype, i: rtype == "Worker") is None
    assert (
        framework.succeeded(job, lambda rtype, i: rtype == "Master")
        == "xgboost-dist-iris-test-train-master-0 completed"
    )


def test_registered_for_its_kind() -> None:
    assert framework_for("XGBoostJob") is xgboost.FRAMEWORK


def test_rejects_an_unknown_replica_type_and_another_kind() -> None:
    with pytest.raises(ValueError, match="replica type 'Worker' is not in XGBoostJob 'xgb'"):
        xgboost.replica_env(small_job(None), "Worker", 0, CLUSTER)
    tf = load_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "tf"},
            "spec": {"tfReplicaSpecs": {"Worker": {"template": TF_POD}}},
        }
    )
    with pytest.raises(TypeError, match=r"takes only XGBoostJobs \(got TFJob\)"):
        xgboost.FRAMEWORK.succeeded(tf, lambda rtype, i: True)
