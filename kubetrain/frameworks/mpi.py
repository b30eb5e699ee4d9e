"""MPI (``MPIJob`` v2beta1: Horovod, DeepSpeed, nccl-tests): every rule of the framework,
stated once.

- Roles: ``launcher`` and ``worker``.
- Environment: the launcher's first container is pointed at the hostfile through the MPI
  implementation's own variables; workers get ``K_MPI_JOB_ROLE``. The hostfile lists each
  worker once with its slots (``<host> slots=N`` for Open MPI, ``<host>:N`` for Intel MPI
  and MPICH), the launcher first when it also runs ranks. The operator mounts it at
  ``/etc/mpi/hostfile``, ``kubetrain run --local`` writes it to a scratch directory (the
  addressing says where).
- Start order: the launcher starts once every worker is Ready.
- Success: the launcher succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api.common import JobBase
from kubetrain.api.kinds import MPI, KindInfo
from kubetrain.api.mpi import MPIImplementation, MPIJob, MPIReplicaType
from kubetrain.frameworks.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.frameworks.base import Done, StartAfter
from kubetrain.frameworks.replicas import replicas_of

LAUNCHER = MPIReplicaType.LAUNCHER.value
WORKER = MPIReplicaType.WORKER.value
#: Where the operator mounts the job's ConfigMap in the launcher.
CONFIG_MOUNT_PATH = "/etc/mpi"
HOSTFILE_PATH = f"{CONFIG_MOUNT_PATH}/hostfile"
#: SSH retries while workers' DNS records appear.
SSH_ARGS = "-o ConnectionAttempts=10"


def implementation(job: MPIJob) -> MPIImplementation:
    """The MPI implementation after defaulting (Open MPI)."""
    return job.spec.mpi_implementation or MPIImplementation.OPEN_MPI


def slots_per_worker(job: MPIJob) -> int:
    """Slots per worker after defaulting (1)."""
    return 1 if job.spec.slots_per_worker is None else job.spec.slots_per_worker


def ranks_of(workers: int, slots: int, *, launcher_runs_ranks: bool = False) -> int:
    """MPI ranks (``mpirun -np``): every hostfile line's slots."""
    return (workers + (1 if launcher_runs_ranks else 0)) * slots


def hostfile(job: MPIJob, addressing: Addressing) -> str:
    """The hostfile text: one line per host, launcher first if it runs ranks."""
    namespace = job.metadata.namespace or "default"
    slots = slots_per_worker(job)
    refs = []
    if job.spec.run_launcher_as_worker:
        refs.append(
            ReplicaRef(job_name=job.name, namespace=namespace, replica_type=LAUNCHER, index=0)
        )
    workers = replicas_of(job.spec.mpi_replica_specs.get(MPIReplicaType.WORKER))
    refs += [
        ReplicaRef(job_name=job.name, namespace=namespace, replica_type=WORKER, index=index)
        for index in range(workers)
    ]
    # Replicas that share a host (every one of them, run locally) become one line with
    # their slots added up: Open MPI rejects a host listed twice with slot counts.
    hosts: dict[str, int] = {}
    for ref in refs:
        host = addressing.mpi_worker_host(ref)
        hosts[host] = hosts.get(host, 0) + slots
    separator = " slots=" if implementation(job) is MPIImplementation.OPEN_MPI else ":"
    return "".join(f"{host}{separator}{count}\n" for host, count in hosts.items())


def _typed(job: JobBase) -> MPIJob:
    if not isinstance(job, MPIJob):
        raise TypeError(f"the MPI framework got a {job.kind}, expected an MPIJob")
    return job


def launcher_env(job: MPIJob, hostfile_path: str = HOSTFILE_PATH) -> list[EnvVar]:
    """The variables injected into the launcher's first container."""
    slots = slots_per_worker(job)
    env = [env_var("K_MPI_JOB_ROLE", "launcher")]
    impl = implementation(job)
    if impl is MPIImplementation.OPEN_MPI:
        env += [
            env_var("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            env_var("OMPI_MCA_orte_default_hostfile", hostfile_path),
            env_var("OMPI_MCA_plm_rsh_args", SSH_ARGS),
            env_var("OMPI_MCA_orte_set_default_slots", slots),
        ]
    elif impl is MPIImplementation.INTEL:
        env += [
            env_var("I_MPI_HYDRA_HOST_FILE", hostfile_path),
            env_var("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_ARGS),
            env_var("I_MPI_PERHOST", slots),
        ]
    else:
        env += [
            env_var("HYDRA_HOST_FILE", hostfile_path),
            env_var("HYDRA_LAUNCH_EXTRA_ARGS", SSH_ARGS),
        ]
    if not job.spec.run_launcher_as_worker:
        # The launcher only runs mpirun: keep GPUs on its node free for workers.
        env += [env_var("NVIDIA_VISIBLE_DEVICES", ""), env_var("NVIDIA_DRIVER_CAPABILITIES", "")]
    return env


def worker_env(job: MPIJob) -> list[EnvVar]:
    """The variables injected into each worker's first container."""
    return [env_var("K_MPI_JOB_ROLE", "worker")]


def replica_env(job: MPIJob, replica_type: str, index: int, addressing: Addressing) -> list[EnvVar]:
    """The injected variables for one replica (same signature as the other frameworks)."""
    if replica_type == LAUNCHER:
        return launcher_env(job, addressing.mpi_hostfile or HOSTFILE_PATH)
    if replica_type == WORKER:
        return worker_env(job)
    raise ValueError(
        f"replica type {replica_type!r} is not an MPIJob replica type: expected "
        f"{LAUNCHER!r} or {WORKER!r}"
    )


class Mpi:
    """The MPI framework (see the module docs)."""

    info: KindInfo = MPI

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        return replica_type.lower()

    def container_env(
        self,
        job: JobBase,
        replica_type: str,
        index: int,
        container: Mapping[str, Any],
        addressing: Addressing,
    ) -> list[EnvVar]:
        """Only the first container of a replica gets the environment."""
        typed = _typed(job)
        containers = typed.replica_specs()[replica_type].template.get("spec", {}).get(
            "containers"
        ) or [{}]
        if container.get("name") != containers[0].get("name"):
            return []
        return replica_env(typed, replica_type, index, addressing)

    def run_container(self, job: JobBase, replica_type: str) -> str | None:
        return None  # the first container (the one mpi-operator modifies)

    def start_order(self, job: JobBase) -> list[StartAfter]:
        workers = replicas_of(_typed(job).spec.mpi_replica_specs.get(MPIReplicaType.WORKER))
        return [
            StartAfter(
                waiting=(LAUNCHER,),
                needed=tuple((WORKER, i) for i in range(workers)),
                waiting_label="the launcher",
                needed_label=f"the {workers} workers",
            )
        ]

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        return f"launcher Job {job.name}-launcher completed" if done(LAUNCHER, 0) else None


FRAMEWORK = Mpi()
