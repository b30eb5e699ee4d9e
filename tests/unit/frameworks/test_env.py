"""The environment the frameworks inject, for the operator (cluster DNS) and for local runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.api import MPIJob, PyTorchJob, TFJob, load_job
from kubetrain.frameworks import (
    ClusterAddressing,
    EnvVar,
    LocalAddressing,
    ReplicaRef,
    mpi,
    pytorch,
    tensorflow,
)

CLUSTER = ClusterAddressing()


def template(name: str, port: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "example/trainer:1"}
    if port is not None:
        container["ports"] = [port]
    return {"spec": {"containers": [container]}}


def pytorch_job(spec: dict[str, Any], name: str = "ddp") -> PyTorchJob:
    job = load_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "team-a", "uid": "uid-123"},
            "spec": spec,
        }
    )
    assert isinstance(job, PyTorchJob)
    return job


def as_dict(env: list[EnvVar]) -> dict[str, str]:
    names = [var["name"] for var in env]
    assert len(names) == len(set(names)), f"duplicate variables in {names}"
    return {var["name"]: var["value"] for var in env}


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
                "template": template("pytorch", {"name": "pytorchjob-port", "containerPort": 29500})
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


def tf_job(spec: dict[str, Any]) -> TFJob:
    job = load_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "tf", "namespace": "ml"},
            "spec": spec,
        }
    )
    assert isinstance(job, TFJob)
    return job


PS_AND_WORKERS = {
    "tfReplicaSpecs": {
        "PS": {"replicas": 1, "template": template("tensorflow")},
        "Worker": {"replicas": 2, "template": template("tensorflow")},
    }
}


def test_tf_config_for_the_operator() -> None:
    env = as_dict(tensorflow.replica_env(tf_job(PS_AND_WORKERS), "Worker", 1, CLUSTER))
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {
            "ps": ["tf-ps-0.ml.svc:2222"],
            "worker": ["tf-worker-0.ml.svc:2222", "tf-worker-1.ml.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }


def test_tf_config_with_a_cluster_domain_and_local_ports() -> None:
    job = tf_job(PS_AND_WORKERS)
    domain = tensorflow.cluster_spec(job, ClusterAddressing(cluster_domain="cluster.local"))
    assert domain["ps"] == ["tf-ps-0.ml.svc.cluster.local:2222"]
    local = LocalAddressing(ports={("PS", 0): 41000, ("Worker", 0): 41001, ("Worker", 1): 41002})
    assert tensorflow.cluster_spec(job, local) == {
        "ps": ["127.0.0.1:41000"],
        "worker": ["127.0.0.1:41001", "127.0.0.1:41002"],
    }


def test_tf_config_is_not_set_for_a_single_replica() -> None:
    job = tf_job(
        {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": template("tensorflow")}}}
    )
    assert tensorflow.replica_env(job, "Worker", 0, CLUSTER) == []


def test_tf_config_sparse_with_dynamic_workers() -> None:
    job = tf_job({**PS_AND_WORKERS, "enableDynamicWorker": True})
    config = tensorflow.tf_config(job, "Worker", 1, CLUSTER)
    assert config is not None
    assert config["cluster"] == {
        "ps": ["tf-ps-0.ml.svc:2222"],
        "worker": {"1": "tf-worker-1.ml.svc:2222"},
    }


def mpi_job(**spec: Any) -> MPIJob:
    job = load_job(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "hvd", "namespace": "ml"},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": template("launcher")},
                    "Worker": {"replicas": 2, "template": template("worker")},
                },
                **spec,
            },
        }
    )
    assert isinstance(job, MPIJob)
    return job


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"slotsPerWorker": 4},
            "hvd-worker-0.hvd.ml.svc slots=4\nhvd-worker-1.hvd.ml.svc slots=4\n",
        ),
        ({}, "hvd-worker-0.hvd.ml.svc slots=1\nhvd-worker-1.hvd.ml.svc slots=1\n"),
        (
            {"mpiImplementation": "Intel", "slotsPerWorker": 2},
            "hvd-worker-0.hvd.ml.svc:2\nhvd-worker-1.hvd.ml.svc:2\n",
        ),
        (
            {"runLauncherAsWorker": True},
            "hvd-launcher.hvd.ml.svc slots=1\n"
            "hvd-worker-0.hvd.ml.svc slots=1\nhvd-worker-1.hvd.ml.svc slots=1\n",
        ),
    ],
    ids=["openmpi", "default-slots", "intel", "launcher-as-worker"],
)
def test_mpi_hostfile_in_the_cluster(spec: dict[str, Any], expected: str) -> None:
    assert mpi.hostfile(mpi_job(**spec), CLUSTER) == expected


def test_mpi_hostfile_locally_merges_slots_on_one_host() -> None:
    # Open MPI rejects a host listed twice with slot counts.
    assert mpi.hostfile(mpi_job(slotsPerWorker=3), LocalAddressing()) == "localhost slots=6\n"


def test_mpi_launcher_env_openmpi() -> None:
    env = as_dict(mpi.replica_env(mpi_job(slotsPerWorker=2), "Launcher", 0, CLUSTER))
    assert env == {
        "K_MPI_JOB_ROLE": "launcher",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        "OMPI_MCA_orte_set_default_slots": "2",
        "NVIDIA_VISIBLE_DEVICES": "",
        "NVIDIA_DRIVER_CAPABILITIES": "",
    }


def test_mpi_launcher_env_other_implementations() -> None:
    intel = as_dict(mpi.launcher_env(mpi_job(mpiImplementation="Intel"), "/x/hostfile"))
    assert intel["I_MPI_HYDRA_HOST_FILE"] == "/x/hostfile"
    assert intel["I_MPI_PERHOST"] == "1"
    mpich = as_dict(mpi.launcher_env(mpi_job(mpiImplementation="MPICH", runLauncherAsWorker=True)))
    assert mpich["HYDRA_HOST_FILE"] == "/etc/mpi/hostfile"
    assert "NVIDIA_VISIBLE_DEVICES" not in mpich  # the launcher runs ranks too


def test_mpi_worker_env_and_rejects_unknown_type() -> None:
    assert mpi.replica_env(mpi_job(), "Worker", 1, CLUSTER) == [
        {"name": "K_MPI_JOB_ROLE", "value": "worker"}
    ]
    with pytest.raises(ValueError, match="'Master' is not an MPIJob replica type"):
        mpi.replica_env(mpi_job(), "Master", 0, CLUSTER)


def test_replica_ref_pod_name() -> None:
    ref = ReplicaRef(job_name="j", namespace="n", replica_type="Worker", index=3)
    assert ref.pod_name == "j-worker-3"
    assert CLUSTER.replica_host(ref, qualified=True) == "j-worker-3.n.svc"
    assert CLUSTER.mpi_host(ref.pod_name, job_name="j", namespace="n") == "j-worker-3.j.n.svc"


@pytest.mark.parametrize(
    ("spec", "running", "expected"),
    [
        ({}, [0, 1], "#!/bin/sh\necho hvd-worker-0.hvd.ml.svc\necho hvd-worker-1.hvd.ml.svc\n"),
        ({}, [1], "#!/bin/sh\necho hvd-worker-1.hvd.ml.svc\n"),
        ({}, [], "#!/bin/sh\n"),
        (
            {"runLauncherAsWorker": True, "slotsPerWorker": 4},
            [0],
            "#!/bin/sh\necho hvd-launcher.hvd.ml.svc\necho hvd-worker-0.hvd.ml.svc\n",
        ),
    ],
    ids=["all-running", "one-running", "none-running", "launcher-runs-ranks"],
)
def test_mpi_discover_hosts_prints_bare_hosts(
    spec: dict[str, Any], running: list[int], expected: str
) -> None:
    # Upstream's format: one host a line, no slots (Horovod takes them from its flags).
    assert mpi.discover_hosts(mpi_job(**spec), CLUSTER, running) == expected


def test_mpi_dns_search_domain() -> None:
    assert CLUSTER.dns_search("hvd", "ml") == "hvd.ml.svc.cluster.local"
    custom = ClusterAddressing(cluster_domain="corp.example")
    assert custom.dns_search("hvd", "ml") == "hvd.ml.svc.corp.example"
