"""``MPIJob``: a typed MPI job (kubeflow.org/v2beta1 MPIJob), e.g. Horovod or nccl-tests.

The launcher runs ``mpirun`` over the workers' slots; the workers run sshd. NCCL and
libfabric settings of the profile are exported to every rank with ``-x``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import MPIJob as MPIJobModel
from kubetrain.api.kinds import MPI
from kubetrain.constructs.job_common import (
    JobProps,
    emit_job,
    job_name,
    metadata,
    pod_template,
    run_policy_wire,
)
from kubetrain.constructs.types import Quantity, Resources
from kubetrain.frameworks import mpi


def _launcher_resources() -> Resources:
    return Resources(cpu=Quantity.millicores(500), memory=Quantity.mebibytes(512))


@dataclass(frozen=True, kw_only=True)
class MPIJobProps(JobProps):
    """Props of :class:`MPIJob`. ``command``/``args`` are the program every rank runs;
    the construct wraps them in ``mpirun`` for the launcher."""

    workers: int = 1
    """Worker replicas (at least one)."""
    slots_per_worker: int | None = None
    """MPI ranks per worker. Default: ``gpus_per_node`` when GPUs are used, else 1."""
    mpi_implementation: str = "OpenMPI"
    """OpenMPI, Intel or MPICH."""
    mpirun_args: tuple[str, ...] = ()
    """Extra mpirun options (OpenMPI syntax). Default: none."""
    launcher_resources: Resources = field(default_factory=_launcher_resources)
    """Launcher resources. Default: 500m CPU, 512Mi memory, no GPU."""
    wait_for_workers: bool = True
    """Create the launcher only once every worker is Ready (launcherCreationPolicy
    WaitForWorkersReady), avoiding the launcher-before-workers race."""
    launcher_command: tuple[str, ...] | None = None
    """Run this in the launcher instead of ``mpirun`` wrapping ``command`` (a script that
    runs mpirun itself and judges its output, as the NCCL preflight does). Default: none."""
    worker_command: tuple[str, ...] = ("/usr/sbin/sshd", "-De")
    """The workers' command: sshd in the foreground for the launcher's mpirun."""
    launcher_restart_policy: str = "OnFailure"
    """Restart policy of the launcher (OnFailure or Never: it is a batch Job)."""
    worker_restart_policy: str = "Never"
    """Restart policy of the workers (OnFailure or Never)."""
    ssh_auth_mount_path: str | None = None
    """Where the SSH key pair is mounted. Default: the API's (``/root/.ssh``)."""
    launcher_on_node_pool: bool = False
    """Bind the launcher to the node pool too (its selector, tolerations and the profile's
    environment, no GPU), e.g. when the launcher must reach host-network workers.
    Default: the launcher runs anywhere and gets the workers' NCCL environment."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 1:
            raise ValueError(f"workers ({self.workers}) must be >= 1")
        if self.slots_per_worker is not None:
            if self.slots_per_worker < 1:
                raise ValueError(f"slots_per_worker ({self.slots_per_worker}) must be >= 1")
            if self.gpus and self.slots_per_worker % self.gpus:
                divisors = [
                    d for d in range(1, self.slots_per_worker + 1) if self.slots_per_worker % d == 0
                ]
                raise ValueError(
                    f"gpus_per_node ({self.gpus}) must divide slots_per_worker "
                    f"({self.slots_per_worker}): use {', '.join(map(str, divisors[:-1]))} "
                    f"or {divisors[-1]}"
                )
        if self.mpi_implementation not in ("OpenMPI", "Intel", "MPICH"):
            raise ValueError(
                f"mpi_implementation ({self.mpi_implementation!r}) must be OpenMPI, Intel or MPICH"
            )
        if not self.command and self.launcher_command is None:
            raise ValueError("command (empty) must name the program mpirun runs on every rank")
        for prop in ("launcher_restart_policy", "worker_restart_policy"):
            value = getattr(self, prop)
            if value not in ("OnFailure", "Never"):
                raise ValueError(
                    f"{prop} ({value!r}) must be OnFailure or Never (an MPIJob's launcher is a "
                    "batch Job and mpi-operator accepts no other policy)"
                )
        if self.launcher_on_node_pool and self.node_pool is None:
            raise ValueError("launcher_on_node_pool (True) needs node_pool")

    @property
    def slots(self) -> int:
        if self.slots_per_worker is not None:
            return self.slots_per_worker
        return self.gpus or 1

    @property
    def world_size(self) -> int:
        """MPI ranks (the MPI framework's count)."""
        return mpi.ranks_of(self.workers, self.slots)


def _exported_env(template: dict[str, Any]) -> list[str]:
    """Variables the ranks need from the launcher: the NCCL/libfabric settings."""
    names: set[str] = set()
    for container in template["spec"]["containers"]:
        for var in container.get("env", []):
            # LD_LIBRARY_PATH: the GKE profiles load NCCL's network plugin from the host.
            if var["name"].startswith(("NCCL_", "FI_", "UCX_", "TORCH_", "HOROVOD_")) or (
                var["name"] == "LD_LIBRARY_PATH"
            ):
                names.add(var["name"])
    return sorted(names)


class MPIJob(constructs.Construct):
    """An MPIJob: a launcher running mpirun and ``workers`` sshd workers; id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: MPIJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        worker = pod_template(
            props,
            name=self.name,
            replica_type="Worker",
            container="worker",
            command=props.worker_command,
            args=(),
        )
        program = [*props.command, *props.args]
        mpirun = ["mpirun"]
        if props.mpi_implementation == "OpenMPI":
            mpirun += [
                "--allow-run-as-root",
                "-np",
                str(props.world_size),
                "-bind-to",
                "none",
                "-map-by",
                "slot",
            ]
            for name in _exported_env(worker):
                mpirun += ["-x", name]
        else:
            mpirun += ["-n", str(props.world_size), "-ppn", str(props.slots)]
            exported = _exported_env(worker)
            if exported:
                mpirun += ["-genvlist", ",".join(exported)]
        if props.launcher_command is not None:
            launcher_command = props.launcher_command
        else:
            launcher_command = tuple([*mpirun, *props.mpirun_args, *program])
        launcher = pod_template(
            props,
            name=self.name,
            replica_type="Launcher",
            container="launcher",
            command=launcher_command,
            args=(),
            gpus=0,
            resources=props.launcher_resources,
            bind_pool=props.launcher_on_node_pool,
            place=False,
        )
        if not props.launcher_on_node_pool:
            # The ranks' NCCL settings are exported from the launcher's environment.
            worker_env = copy.deepcopy(worker["spec"]["containers"][0].get("env", []))
            if worker_env:
                launcher["spec"]["containers"][0]["env"] = worker_env
        spec: dict[str, Any] = {
            "slotsPerWorker": props.slots,
            "mpiImplementation": props.mpi_implementation,
            "launcherCreationPolicy": "WaitForWorkersReady"
            if props.wait_for_workers
            else "AtStartup",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": props.launcher_restart_policy,
                    "template": launcher,
                },
                "Worker": {
                    "replicas": props.workers,
                    "restartPolicy": props.worker_restart_policy,
                    "template": worker,
                },
            },
        }
        if props.ssh_auth_mount_path is not None:
            spec["sshAuthMountPath"] = props.ssh_auth_mount_path
        if props.run_policy is not None:
            spec["runPolicy"] = run_policy_wire(props)
        job = emit_job(
            self,
            {
                "apiVersion": MPI.api_version,
                "kind": MPI.kind,
                "metadata": metadata(props, self.name),
                "spec": spec,
            },
        )
        assert isinstance(job, MPIJobModel)
        self.job = job

    @property
    def world_size(self) -> int:
        return self.props.world_size

    @property
    def manifest(self) -> dict[str, Any]:
        """The job as emitted (wire form)."""
        return self.job.to_wire()
