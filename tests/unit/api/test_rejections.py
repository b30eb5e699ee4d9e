"""Bad jobs are rejected with every error reported, each naming its field path."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import JobValidationError, load_job
from kubetrain.api.invariants import NAME_FITS
from kubetrain.api.mpi import MPI_NEEDS_WORKER, MPI_ONE_LAUNCHER
from kubetrain.api.pytorch import (
    PYTORCH_ELASTIC_BOUNDS,
    PYTORCH_ELASTIC_NEEDS_WORKER,
    PYTORCH_NPROC_ONCE,
    PYTORCH_ONE_MASTER,
)
from kubetrain.api.tensorflow import TF_ONE_CHIEF
from tests.builders.jobs import mpi_job, pytorch_job, set_path, template, tf_job

W = "spec.pytorchReplicaSpecs.Worker"

# id -> (manifest, expected path, expected fragment of the message)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "negative-replicas": (
        set_path(pytorch_job(), f"{W}.replicas", -1),
        f"{W}.replicas",
        "-1 is invalid: must be >= 0",
    ),
    "replicas-not-an-integer": (
        set_path(pytorch_job(), f"{W}.replicas", "3"),
        f"{W}.replicas",
        "must be an integer",
    ),
    "unknown-replica-type": (
        set_path(pytorch_job(), "spec.pytorchReplicaSpecs.Wroker", {"template": template()}),
        "spec.pytorchReplicaSpecs.Wroker",
        "replica type must be one of: Master, Worker",
    ),
    "unknown-restart-policy": (
        set_path(pytorch_job(), f"{W}.restartPolicy", "Sometimes"),
        f"{W}.restartPolicy",
        "'ExitCode'",
    ),
    "unknown-spec-field": (
        set_path(pytorch_job(), "spec.runPolicy", {"cleanPodPolicy": "All", "backofLimit": 3}),
        "spec.runPolicy.backofLimit",
        "did you mean 'backoffLimit'?",
    ),
    "bad-clean-pod-policy": (
        pytorch_job(runPolicy={"cleanPodPolicy": "Some"}),
        "spec.runPolicy.cleanPodPolicy",
        "must be 'All', 'Running' or 'None'",
    ),
    "negative-ttl": (
        pytorch_job(runPolicy={"ttlSecondsAfterFinished": -5}),
        "spec.runPolicy.ttlSecondsAfterFinished",
        "must be >= 0",
    ),
    "suspend-not-bool": (
        pytorch_job(runPolicy={"suspend": "yes"}),
        "spec.runPolicy.suspend",
        "must be true or false",
    ),
    "bad-quantity": (
        pytorch_job(runPolicy={"schedulingPolicy": {"minResources": {"cpu": "lots"}}}),
        "spec.runPolicy.schedulingPolicy.minResources.cpu",
        "must be a Kubernetes quantity",
    ),
    "bad-nproc-per-node": (
        pytorch_job(nprocPerNode="eight"),
        "spec.nprocPerNode",
        "must match",
    ),
    "missing-template": (
        set_path(pytorch_job(), f"{W}", {"replicas": 1}),
        f"{W}.template",
        "is required",
    ),
    "misspelt-pod-spec-field": (
        set_path(pytorch_job(), f"{W}.template.spec", {"contianers": []}),
        f"{W}.template.spec.contianers",
        "did you mean 'containers'?",
    ),
    "container-without-name": (
        set_path(pytorch_job(), f"{W}.template.spec.containers[0]", {"image": "x"}),
        f"{W}.template.spec.containers[0].name",
        "is required",
    ),
    "container-port-not-int": (
        set_path(
            pytorch_job(),
            f"{W}.template.spec.containers[0]",
            {"name": "pytorch", "ports": [{"containerPort": "http"}]},
        ),
        f"{W}.template.spec.containers[0].ports[0].containerPort",
        "must be of type integer",
    ),
    "bad-resource-quantity": (
        set_path(
            pytorch_job(),
            f"{W}.template.spec.containers[0]",
            {"name": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "eight"}}},
        ),
        f"{W}.template.spec.containers[0].resources.limits.nvidia.com/gpu",
        "must match",
    ),
    "two-masters": (
        set_path(pytorch_job(), "spec.pytorchReplicaSpecs.Master.replicas", 2),
        "spec.pytorchReplicaSpecs.Master.replicas",
        PYTORCH_ONE_MASTER,
    ),
    "elastic-without-worker": (
        {
            **pytorch_job(elasticPolicy={"minReplicas": 1}),
            "spec": {
                "elasticPolicy": {"minReplicas": 1},
                "pytorchReplicaSpecs": {"Master": {"template": template()}},
            },
        },
        "spec.pytorchReplicaSpecs",
        PYTORCH_ELASTIC_NEEDS_WORKER,
    ),
    "elastic-min-above-max": (
        pytorch_job(elasticPolicy={"minReplicas": 4, "maxReplicas": 2}),
        "spec.elasticPolicy.minReplicas",
        PYTORCH_ELASTIC_BOUNDS,
    ),
    "nproc-set-twice": (
        pytorch_job(nprocPerNode="2", elasticPolicy={"nProcPerNode": 2}),
        "spec.elasticPolicy.nProcPerNode",
        PYTORCH_NPROC_ONCE,
    ),
    "tf-chief-and-master": (
        set_path(
            set_path(tf_job(), "spec.tfReplicaSpecs.Chief", {"template": template("tensorflow")}),
            "spec.tfReplicaSpecs.Master",
            {"template": template("tensorflow")},
        ),
        "spec.tfReplicaSpecs",
        TF_ONE_CHIEF,
    ),
    "tf-bad-success-policy": (
        tf_job(successPolicy="AnyWorker"),
        "spec.successPolicy",
        "must be '' or 'AllWorkers'",
    ),
    "mpi-two-launchers": (
        set_path(mpi_job(), "spec.mpiReplicaSpecs.Launcher.replicas", 2),
        "spec.mpiReplicaSpecs.Launcher.replicas",
        MPI_ONE_LAUNCHER,
    ),
    "mpi-no-workers": (
        set_path(mpi_job(), "spec.mpiReplicaSpecs.Worker.replicas", 0),
        "spec.mpiReplicaSpecs.Worker.replicas",
        MPI_NEEDS_WORKER,
    ),
    "mpi-missing-launcher": (
        {**mpi_job(), "spec": {"mpiReplicaSpecs": {"Worker": {"template": template("worker")}}}},
        "spec.mpiReplicaSpecs.Launcher",
        MPI_ONE_LAUNCHER,
    ),
    "mpi-relative-ssh-path": (
        mpi_job(sshAuthMountPath="home/.ssh"),
        "spec.sshAuthMountPath",
        "must match ^/",
    ),
    "mpi-bad-implementation": (
        mpi_job(mpiImplementation="MVAPICH"),
        "spec.mpiImplementation",
        "'OpenMPI', 'Intel' or 'MPICH'",
    ),
    "name-not-dns-1035": (
        set_path(pytorch_job(), "metadata.name", "1-job"),
        "metadata.name",
        "must match ^[a-z]",
    ),
    "name-too-long-for-children": (
        set_path(
            set_path(mpi_job(), "metadata.name", "j" * 55),
            "spec.mpiReplicaSpecs.Worker.replicas",
            1000,
        ),
        "metadata.name",
        NAME_FITS,
    ),
    "wrong-api-version": (
        set_path(mpi_job(), "apiVersion", "kubeflow.org/v1"),
        "apiVersion",
        "must be kubeflow.org/v2beta1 for a MPIJob",
    ),
    "unknown-kind": (
        set_path(pytorch_job(), "kind", "NoSuchJob"),
        "kind",
        "must be one of: PyTorchJob, TFJob, MPIJob",
    ),
}


def _errors(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(JobValidationError) as caught:
        load_job(manifest)
    return [str(e) for e in caught.value.errors]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_rejects_bad_job(case: str) -> None:
    manifest, path, fragment = CASES[case]
    errors = _errors(manifest)
    matching = [e for e in errors if e.startswith(f"{path}:")]
    assert matching, f"no error at {path}; got {errors}"
    assert any(fragment in e for e in matching), f"{fragment!r} not in {matching}"


def test_rejects_all_errors_at_once() -> None:
    manifest = set_path(pytorch_job(), f"{W}.replicas", -1)
    manifest = set_path(manifest, "spec.pytorchReplicaSpecs.Master.restartPolicy", "Sometimes")
    manifest = set_path(manifest, f"{W}.template.spec.contianers", [])
    manifest = set_path(manifest, "spec.runPolicy", {"cleanPodPolicy": "Nope"})
    errors = _errors(manifest)
    for path in (
        f"{W}.replicas",
        "spec.pytorchReplicaSpecs.Master.restartPolicy",
        f"{W}.template.spec.contianers",
        "spec.runPolicy.cleanPodPolicy",
    ):
        assert any(e.startswith(f"{path}:") for e in errors), (path, errors)


def test_rejects_with_the_documented_message_format() -> None:
    errors = _errors(set_path(pytorch_job(), f"{W}.replicas", -1))
    assert "spec.pytorchReplicaSpecs.Worker.replicas: -1 is invalid: must be >= 0" in errors


def test_name_too_long_says_how_long_it_may_be() -> None:
    manifest = set_path(pytorch_job(), "metadata.name", "a" * 55)
    (error,) = [e for e in _errors(manifest) if e.startswith("metadata.name")]
    # 'aaa…-worker-1' is 55 + 9 = 64 characters: one too many.
    assert "use at most 54 characters" in error


def test_rejects_non_mapping_document() -> None:
    errors = _errors(["not", "a", "job"])  # type: ignore[arg-type]
    assert errors[0].startswith("<document>:")
