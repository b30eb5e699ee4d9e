"""The explicit defaulting step fills in upstream's defaults and nothing else."""

from __future__ import annotations

from kubetrain.api import MPIJob, PyTorchJob, TFJob, apply_defaults, load_job
from tests.unit.api.helpers import mpi_job, pytorch_job, set_path, tf_job


def test_parsing_does_not_default() -> None:
    job = load_job(pytorch_job())
    assert job.spec.run_policy is None
    assert job.to_wire() == pytorch_job()


def test_pytorch_defaults() -> None:
    wire = set_path(
        pytorch_job(),
        "spec.pytorchReplicaSpecs.Worker",
        {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "s"},
                        {"name": "pytorch", "image": "p"},
                    ]
                }
            }
        },
    )
    job = apply_defaults(load_job(wire))
    assert isinstance(job, PyTorchJob)
    assert job.spec.nproc_per_node == "auto"
    assert job.spec.run_policy is not None
    assert job.spec.run_policy.clean_pod_policy == "None"
    assert job.spec.run_policy.suspend is False
    worker = job.replica_specs()["Worker"]
    assert worker.replicas == 1
    assert worker.restart_policy == "OnFailure"
    sidecar, pytorch = worker.template["spec"]["containers"]
    assert "ports" not in sidecar
    assert pytorch["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}
    ]


def test_pytorch_keeps_a_user_port() -> None:
    wire = set_path(
        pytorch_job(),
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]",
        {
            "name": "pytorch",
            "image": "p",
            "ports": [{"name": "pytorchjob-port", "containerPort": 29500}],
        },
    )
    job = apply_defaults(load_job(wire))
    master = job.replica_specs()["Master"]
    # Kept, with the protocol the API server stores on every port.
    assert master.template["spec"]["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 29500, "protocol": "TCP"}
    ]


def test_pytorch_elastic_bounds_mirror() -> None:
    job = apply_defaults(load_job(pytorch_job(elasticPolicy={"maxReplicas": 4})))
    assert isinstance(job, PyTorchJob) and job.spec.elastic_policy is not None
    assert (job.spec.elastic_policy.min_replicas, job.spec.elastic_policy.max_replicas) == (4, 4)
    assert job.spec.elastic_policy.rdzv_backend == "c10d"
    job = apply_defaults(load_job(pytorch_job(elasticPolicy={})))
    assert isinstance(job, PyTorchJob) and job.spec.elastic_policy is not None
    # Neither bound set: both take the Worker replica count (2 in the helper job).
    assert (job.spec.elastic_policy.min_replicas, job.spec.elastic_policy.max_replicas) == (2, 2)


def test_pytorch_deprecated_nproc_suppresses_auto() -> None:
    job = apply_defaults(load_job(pytorch_job(elasticPolicy={"nProcPerNode": 4})))
    assert isinstance(job, PyTorchJob)
    assert job.spec.nproc_per_node is None


def test_tf_defaults() -> None:
    job = apply_defaults(load_job(tf_job()))
    assert isinstance(job, TFJob)
    worker = job.replica_specs()["Worker"]
    assert worker.restart_policy == "Never"
    assert worker.template["spec"]["containers"][0]["ports"] == [
        {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}
    ]


def test_mpi_defaults() -> None:
    wire = mpi_job()
    del wire["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    job = apply_defaults(load_job(wire))
    assert isinstance(job, MPIJob)
    spec = job.spec
    assert spec.slots_per_worker == 1
    assert spec.ssh_auth_mount_path == "/root/.ssh"
    assert spec.launcher_creation_policy == "AtStartup"
    assert spec.mpi_implementation == "OpenMPI"
    assert spec.run_launcher_as_worker is False
    launcher = job.replica_specs()["Launcher"]
    worker = job.replica_specs()["Worker"]
    assert (launcher.restart_policy, worker.restart_policy) == ("OnFailure", "Never")
    assert worker.replicas == 1  # upstream's 0 would fail its own validation
    assert "ports" not in worker.template["spec"]["containers"][0]


def test_defaults_keep_user_values() -> None:
    job = apply_defaults(
        load_job(
            mpi_job(
                slotsPerWorker=8, mpiImplementation="Intel", runPolicy={"cleanPodPolicy": "All"}
            )
        )
    )
    assert isinstance(job, MPIJob)
    assert job.spec.slots_per_worker == 8
    assert job.spec.mpi_implementation == "Intel"
    assert job.spec.run_policy is not None and job.spec.run_policy.clean_pod_policy == "All"


def test_defaulting_is_idempotent() -> None:
    for wire in (pytorch_job(elasticPolicy={"minReplicas": 1}), tf_job(), mpi_job()):
        once = apply_defaults(load_job(wire))
        assert apply_defaults(once).to_wire() == once.to_wire()
