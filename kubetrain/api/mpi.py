"""MPIJob (kubeflow.org/v2beta1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictBool, StrictStr

from kubetrain.api.base import KubeModel, NonNegInt32, StoredDefault
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.kinds import MPI

KIND = MPI.kind
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"


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
