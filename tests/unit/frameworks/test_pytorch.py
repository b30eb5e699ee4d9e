"""PyTorch's environment contract (PyTorchJob), for the operator and for local runs."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import PyTorchJob
from kubetrain.frameworks import ClusterAddressing, LocalAddressing, pytorch
from tests.builders.jobs import as_dict, loaded, template

CLUSTER = ClusterAddressing()


def pytorch_job(spec: dict[str, Any], name: str = "ddp") -> PyTorchJob:
    return loaded(PyTorchJob, spec, name, "team-a", uid="uid-123")


MASTER_AND_WORKERS = {
    "nprocPerNode": "8",
    "pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": template("pytorch")},
        "Worker": {"replicas": 3, "template": template("pytorch")},
    },
}


@pytest.mark.parametrize(
    ("replica_type", "index", "rank"),
    [("Master", 0, "0"), ("Worker", 0, "1"), ("Worker", 2, "3")],
    ids=["master", "worker-0", "worker-2"],
)
def test_pytorch_env_with_master(replica_type: str, index: int, rank: str) -> None:
    env = as_dict(
        pytorch.replica_env(pytorch_job(MASTER_AND_WORKERS), replica_type, index, CLUSTER)
    )
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "ddp-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "32",  # 4 nodes x 8 processes, not 4 replicas
        "RANK": rank,
        "PET_MASTER_ADDR": "ddp-master-0",
        "PET_MASTER_PORT": "23456",
        "PET_NODE_RANK": rank,
        "PET_NPROC_PER_NODE": "8",
        "PET_NNODES": "4",
    }


def test_pytorch_master_port_comes_from_the_declared_container_port() -> None:
    spec = {
        "pytorchReplicaSpecs": {
            "Master": {
                "template": template(
                    "pytorch", port={"name": "pytorchjob-port", "containerPort": 29500}
                )
            },
            "Worker": {"replicas": 1, "template": template("pytorch")},
        }
    }
    env = as_dict(pytorch.replica_env(pytorch_job(spec), "Worker", 0, CLUSTER))
    assert env["MASTER_PORT"] == "29500"
    # nprocPerNode defaults to auto, which counts as one process per node.
    assert env["PET_NPROC_PER_NODE"] == "auto"
    assert env["WORLD_SIZE"] == "2"


def test_pytorch_local_addressing_uses_loopback_and_the_given_port() -> None:
    local = LocalAddressing(ports={("Master", 0): 40001, ("Worker", 0): 40002})
    env = as_dict(pytorch.replica_env(pytorch_job(MASTER_AND_WORKERS), "Worker", 0, local))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "40001")
    assert env["PET_MASTER_ADDR"] == "127.0.0.1"


def test_pytorch_elastic_env_without_master() -> None:
    spec = {
        "nprocPerNode": "2",
        "elasticPolicy": {
            "minReplicas": 2,
            "maxReplicas": 4,
            "maxRestarts": 3,
            "rdzvConf": [{"key": "timeout", "value": "900"}],
        },
        "pytorchReplicaSpecs": {"Worker": {"replicas": 3, "template": template("pytorch")}},
    }
    env = as_dict(pytorch.replica_env(pytorch_job(spec), "Worker", 1, CLUSTER))
    assert "MASTER_ADDR" not in env and "RANK" not in env
    assert env["PET_NNODES"] == "2:4"
    assert env["PET_RDZV_ENDPOINT"] == "ddp-worker-0:23456"
    assert env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_RDZV_ID"] == "uid-123"
    assert env["PET_RDZV_CONF"] == "timeout=900"
    assert env["PET_MAX_RESTARTS"] == "3"


def test_rejects_unknown_pytorch_replica_type() -> None:
    with pytest.raises(ValueError, match=r"'Chief' is not in PyTorchJob 'ddp'.*'Master', 'Worker'"):
        pytorch.replica_env(pytorch_job(MASTER_AND_WORKERS), "Chief", 0, CLUSTER)
