"""PaddlePaddle's rules: upstream's environment (training-operator v1.9 ``envvar.go``) for
each replica of upstream's examples, roles, start order and the success rule."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import PaddleJob, apply_defaults, load_job
from kubetrain.frameworks import FRAMEWORKS, ClusterAddressing, LocalAddressing, paddle
from kubetrain.manifest import parse_yaml
from tests.conftest import REPO_ROOT

UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "paddlepaddle"
CLUSTER = ClusterAddressing()
FRAMEWORK = paddle.FRAMEWORK
POD_IP = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def upstream_job(name: str) -> PaddleJob:
    job = apply_defaults(load_job(parse_yaml((UPSTREAM / name).read_text())))
    assert isinstance(job, PaddleJob)
    return job


def container(name: str, port: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "paddle:2.6"}
    if port is not None:
        out["ports"] = [{"name": "master", "containerPort": port}]
    return out


def paddle_job(specs: dict[str, Any], name: str = "pp") -> PaddleJob:
    job = apply_defaults(
        load_job(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PaddleJob",
                "metadata": {"name": name, "namespace": "team-a"},
                "spec": {"paddleReplicaSpecs": specs},
            }
        )
    )
    assert isinstance(job, PaddleJob)
    return job


def env_of(job: PaddleJob, rtype: str, index: int, addressing: Any = CLUSTER) -> list[Any]:
    spec = job.replica_specs()[rtype]
    first = spec.template["spec"]["containers"][0]
    return list(FRAMEWORK.container_env(job, rtype, index, first, addressing))


@pytest.mark.parametrize("example", ["simple-cpu.yaml", "simple-gpu.yaml"])
def test_upstream_example_env_worker_0_is_the_rendezvous_on_its_own_ip(example: str) -> None:
    job = upstream_job(example)
    assert env_of(job, "Worker", 0) == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": job.name},
        {"name": "PADDLE_NNODES", "value": "2"},
        POD_IP,
        {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):37777"},
    ]


@pytest.mark.parametrize("example", ["simple-cpu.yaml", "simple-gpu.yaml"])
def test_upstream_example_env_worker_1_points_at_worker_0(example: str) -> None:
    job = upstream_job(example)
    assert env_of(job, "Worker", 1) == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": job.name},
        {"name": "PADDLE_NNODES", "value": "2"},
        {"name": "PADDLE_MASTER", "value": f"{job.name}-worker-0:37777"},
    ]


PS_MODE = {
    "Master": {"replicas": 2, "template": {"spec": {"containers": [container("paddle", 6000)]}}},
    "Worker": {"replicas": 3, "template": {"spec": {"containers": [container("paddle")]}}},
}


@pytest.mark.parametrize(
    ("rtype", "index", "expected"),
    [
        ("Master", 0, [POD_IP, {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):6000"}]),
        ("Master", 1, [{"name": "PADDLE_MASTER", "value": "pp-master-0:6000"}]),
        # Worker 0 is not the rendezvous when there is a Master.
        ("Worker", 0, [{"name": "PADDLE_MASTER", "value": "pp-master-0:6000"}]),
        ("Worker", 2, [{"name": "PADDLE_MASTER", "value": "pp-master-0:6000"}]),
    ],
    ids=["master-0", "master-1", "worker-0", "worker-2"],
)
def test_parameter_server_mode_env(rtype: str, index: int, expected: list[Any]) -> None:
    count = "PADDLE_SERVER_NUM" if rtype == "Master" else "PADDLE_TRAINER_NUM"
    assert env_of(paddle_job(PS_MODE), rtype, index) == [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PADDLE_JOB_ID", "value": "pp"},
        {"name": "PADDLE_NNODES", "value": "5"},
        *expected,
        {"name": count, "value": "1"},
    ]


def test_default_port_is_36543_and_read_from_the_paddle_container() -> None:
    sidecar_first = {"containers": [container("sidecar", 9999), container("paddle")]}
    job = paddle_job({"Worker": {"replicas": 2, "template": {"spec": sidecar_first}}})
    assert {"name": "PADDLE_MASTER", "value": "pp-worker-0:36543"} in env_of(job, "Worker", 1)


def test_every_container_gets_the_environment() -> None:
    two = {"containers": [container("paddle"), container("logger")]}
    job = paddle_job({"Worker": {"replicas": 2, "template": {"spec": two}}})
    for c in two["containers"]:
        names = [v["name"] for v in FRAMEWORK.container_env(job, "Worker", 1, c, CLUSTER)]
        assert names == ["PYTHONUNBUFFERED", "PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER"]


def test_local_addressing_uses_loopback_and_the_rendezvous_port() -> None:
    job = upstream_job("simple-cpu.yaml")
    local = LocalAddressing(ports={("Worker", 0): 41000, ("Worker", 1): 41001})
    assert env_of(job, "Worker", 1, local)[-1] == {
        "name": "PADDLE_MASTER",
        "value": "127.0.0.1:41000",
    }
    assert env_of(job, "Worker", 0, local)[-1]["value"] == "$(POD_IP_DUMMY):41000"


def test_rejects_unknown_replica_type() -> None:
    with pytest.raises(ValueError, match="replica type 'Master' is not in PaddleJob"):
        paddle.replica_env(upstream_job("simple-cpu.yaml"), "Master", 0, CLUSTER)


def test_rejects_another_kind() -> None:
    tf = load_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "t"},
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {
                        "template": {
                            "spec": {"containers": [{"name": "tensorflow", "image": "tf:1"}]}
                        }
                    }
                }
            },
        }
    )
    with pytest.raises(TypeError, match=r"takes only PaddleJobs \(got TFJob\)"):
        FRAMEWORK.succeeded(tf, lambda t, i: True)


def test_registered_with_upstreams_kind_row() -> None:
    assert FRAMEWORKS["PaddleJob"] is FRAMEWORK
    assert FRAMEWORK.run_container(upstream_job("simple-cpu.yaml"), "Worker") == "paddle"


def test_roles_only_the_master_as_upstreams_is_master_role() -> None:
    ps, collective = paddle_job(PS_MODE), upstream_job("simple-cpu.yaml")
    assert FRAMEWORK.role(ps, "Master", 0) == "master"
    assert FRAMEWORK.role(ps, "Worker", 0) is None
    assert FRAMEWORK.role(collective, "Worker", 0) is None


def test_no_start_order() -> None:
    assert FRAMEWORK.start_order(paddle_job(PS_MODE)) == []
    assert FRAMEWORK.start_order(upstream_job("simple-cpu.yaml")) == []


@pytest.mark.parametrize(
    ("done", "expected"),
    [
        ({("Worker", 0)}, None),
        ({("Worker", 0), ("Worker", 1)}, "all 2 workers completed"),
    ],
    ids=["one-of-two-workers", "both-workers"],
)
def test_success_without_master_needs_every_worker(
    done: set[tuple[str, int]], expected: str | None
) -> None:
    job = upstream_job("simple-cpu.yaml")
    assert FRAMEWORK.succeeded(job, lambda t, i: (t, i) in done) == expected


@pytest.mark.parametrize(
    ("done", "expected"),
    [
        ({("Worker", i) for i in range(3)} | {("Master", 0)}, None),
        ({("Master", 0), ("Master", 1)}, "all 2 masters completed"),
    ],
    ids=["workers-and-one-master", "every-master"],
)
def test_success_with_master_needs_every_master_only(
    done: set[tuple[str, int]], expected: str | None
) -> None:
    assert FRAMEWORK.succeeded(paddle_job(PS_MODE), lambda t, i: (t, i) in done) == expected


def test_success_with_one_master_names_it() -> None:
    one = {**PS_MODE, "Master": {**PS_MODE["Master"], "replicas": 1}}
    job = paddle_job(one)
    assert FRAMEWORK.succeeded(job, lambda t, i: t == "Master") == "pp-master-0 completed"


def test_a_master_with_no_replicas_leaves_success_to_the_workers() -> None:
    none = {**PS_MODE, "Master": {**PS_MODE["Master"], "replicas": 0}}
    job = paddle_job(none)
    assert FRAMEWORK.succeeded(job, lambda t, i: False) is None
    assert FRAMEWORK.succeeded(job, lambda t, i: t == "Worker") == "all 3 workers completed"
    # Still parameter-server mode for the environment, as upstream decides it by the key.
    assert env_of(job, "Worker", 0)[-1] == {"name": "PADDLE_TRAINER_NUM", "value": "1"}
