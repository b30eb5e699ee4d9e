"""MPI's launcher and worker contract (MPIJob): hostfile, discover_hosts, environment."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import MPIJob
from kubetrain.frameworks import ClusterAddressing, LocalAddressing, ReplicaRef, mpi
from tests.builders.jobs import as_dict, loaded, template

CLUSTER = ClusterAddressing()


def mpi_job(**spec: Any) -> MPIJob:
    replicas = {
        "Launcher": {"replicas": 1, "template": template("launcher")},
        "Worker": {"replicas": 2, "template": template("worker")},
    }
    return loaded(MPIJob, {"mpiReplicaSpecs": replicas, **spec}, "hvd")


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
