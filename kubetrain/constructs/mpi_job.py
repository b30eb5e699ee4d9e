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
from kubetrain.constructs.job_common import (
    JobProps,
    emit_job,
    job_name,
    metadata,
    pod_template,
    run_policy_wire,
)
from kubetrain.constructs.types import Quantity, Resources


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
        if not self.command:
            raise ValueError("command (empty) must name the program mpirun runs on every rank")

    @property
    def slots(self) -> int:
        if self.slots_per_worker is not None:
            return self.slots_per_worker
        return self.gpus or 1

    @property
    def world_size(self) -> int:
        return self.workers * self.slots


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
            command=("/usr/sbin/sshd", "-De"),
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
        launcher = pod_template(
            props,
            name=self.name,
            replica_type="Launcher",
            container="launcher",
            command=tuple([*mpirun, *props.mpirun_args, *program]),
            args=(),
            gpus=0,
            resources=props.launcher_resources,
            bind_pool=False,
        )
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
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": launcher},
                "Worker": {"replicas": props.workers, "restartPolicy": "Never", "template": worker},
            },
        }
        if props.run_policy is not None:
            spec["runPolicy"] = run_policy_wire(props)
        job = emit_job(
            self,
            {
                "apiVersion": "kubeflow.org/v2beta1",
                "kind": "MPIJob",
                "metadata": metadata(props, self.name),
                "spec": spec,
            },
        )
        assert isinstance(job, MPIJobModel)
        self.job = job

    @property
    def world_size(self) -> int:
        return self.props.world_size
