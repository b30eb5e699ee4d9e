"""MPIJob (kubeflow.org/v2beta1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StrictBool, StrictStr

from kubetrain.api.base import KubeModel, NonNegInt32, StoredDefault
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.job_kind import JobKind
from kubetrain.api.kind_info import KUBEFLOW_GROUP, KindInfo
from kubetrain.api.rules import (
    ROOT,
    Rule,
    cel_present,
    cel_replicas,
    replica_node,
    replicas_of,
    spec_of,
    specs_of,
)

DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"


INFO = KindInfo(
    kind="MPIJob",
    short="mpi",
    group=KUBEFLOW_GROUP,
    version="v2beta1",
    plural="mpijobs",
    singular="mpijob",
    operator_name="mpi-operator",
    replica_specs_field="mpiReplicaSpecs",
    replica_types=("Launcher", "Worker"),
    default_restart_policies=(("Launcher", "OnFailure"), ("Worker", "Never")),
)


class MPIReplicaType(StrEnum):
    LAUNCHER = "Launcher"
    WORKER = "Worker"


class LauncherCreationPolicy(StrEnum):
    AT_STARTUP = "AtStartup"
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


class MPIImplementation(StrEnum):
    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class MPIJobSpec(KubeModel):
    slots_per_worker: Annotated[NonNegInt32 | None, StoredDefault(1)] = Field(
        default=None, description="MPI slots (processes) per worker. Default: 1."
    )
    run_launcher_as_worker: Annotated[StrictBool | None, StoredDefault(False)] = Field(
        default=None, description="Also run ranks in the launcher. Default: false."
    )
    run_policy: RunPolicy | None = None
    mpi_replica_specs: dict[MPIReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Launcher (exactly one) and Worker (none with runLauncherAsWorker).",
    )
    ssh_auth_mount_path: Annotated[StrictStr | None, StoredDefault(DEFAULT_SSH_AUTH_MOUNT_PATH)] = (
        Field(
            default=None,
            pattern=r"^/",
            description="Where the SSH keys are mounted. Default: /root/.ssh.",
        )
    )
    launcher_creation_policy: Annotated[
        LauncherCreationPolicy | None, StoredDefault(LauncherCreationPolicy.AT_STARTUP.value)
    ] = Field(default=None, description="AtStartup or WaitForWorkersReady. Default: AtStartup.")
    mpi_implementation: Annotated[
        MPIImplementation | None, StoredDefault(MPIImplementation.OPEN_MPI.value)
    ] = Field(default=None, description="OpenMPI, Intel or MPICH. Default: OpenMPI.")


class MPIJob(JobBase):
    """An MPI job (Horovod, nccl-tests, ...), wire-compatible with Kubeflow's MPIJob v2beta1."""

    replica_specs_attr: ClassVar[str] = "mpi_replica_specs"

    api_version: Literal["kubeflow.org/v2beta1"] = "kubeflow.org/v2beta1"
    kind: Literal["MPIJob"] = "MPIJob"
    spec: MPIJobSpec


# --- the kind's own rules (beside every kind's, kubetrain.api.invariants) ---------------

_MPI = INFO.replica_specs_field
MPI_ONE_LAUNCHER = "an MPIJob needs exactly one Launcher replica"
MPI_NEEDS_WORKER = (
    "an MPIJob needs a Worker replica spec with at least one replica "
    "(or no Worker at all with runLauncherAsWorker: true)"
)
MPI_RESTART_POLICY = (
    "an MPIJob's restartPolicy must be Never or OnFailure (as upstream's mpi-operator: "
    "its launcher is a batch Job, whose pods cannot use Always or ExitCode)"
)


def _check_mpi_launcher(obj: dict[str, Any]) -> list[FieldError]:
    specs = specs_of(obj, _MPI)
    if "Launcher" not in specs:
        return [FieldError(f"spec.{_MPI}.Launcher", MPI_ONE_LAUNCHER, kind="required")]
    count = replicas_of(specs["Launcher"])
    if count is not None and count != 1:
        return [FieldError(f"spec.{_MPI}.Launcher.replicas", MPI_ONE_LAUNCHER, count)]
    return []


def _check_mpi_worker(obj: dict[str, Any]) -> list[FieldError]:
    specs = specs_of(obj, _MPI)
    if "Worker" not in specs:
        if spec_of(obj).get("runLauncherAsWorker") is True:
            return []
        return [FieldError(f"spec.{_MPI}.Worker", MPI_NEEDS_WORKER, kind="required")]
    count = replicas_of(specs["Worker"])
    if count is not None and count < 1:
        return [FieldError(f"spec.{_MPI}.Worker.replicas", MPI_NEEDS_WORKER, count)]
    return []


def _check_mpi_restart(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for rtype, rspec in specs_of(obj, _MPI).items():
        policy = rspec.get("restartPolicy") if isinstance(rspec, dict) else None
        if policy is not None and policy not in ("Never", "OnFailure"):
            errors.append(
                FieldError(f"spec.{_MPI}.{rtype}.restartPolicy", MPI_RESTART_POLICY, policy)
            )
    return errors


def _invariants() -> tuple[Rule, ...]:
    launcher = cel_replicas(f"self.spec.{_MPI}", "'Launcher'")
    mpi_worker = cel_replicas(f"self.spec.{_MPI}", "'Worker'")
    return (
        Rule(
            "mpi-one-launcher",
            (INFO.kind,),
            MPI_ONE_LAUNCHER,
            f"({cel_present(_MPI, 'Launcher')}) && {launcher} == 1",
            ROOT,
            _check_mpi_launcher,
            f".spec.{_MPI}",
        ),
        Rule(
            "mpi-needs-worker",
            (INFO.kind,),
            MPI_NEEDS_WORKER,
            f"({cel_present(_MPI, 'Worker')}) ? {mpi_worker} >= 1 : "
            "(has(self.spec.runLauncherAsWorker) && self.spec.runLauncherAsWorker)",
            ROOT,
            _check_mpi_worker,
            f".spec.{_MPI}",
        ),
        Rule(
            "mpi-restart-policy",
            (INFO.kind,),
            MPI_RESTART_POLICY,
            "!has(self.restartPolicy) || self.restartPolicy in ['Never', 'OnFailure']",
            replica_node(INFO),
            _check_mpi_restart,
            ".restartPolicy",
        ),
    )


JOB_KIND = JobKind(INFO, MPIJob, _invariants())
