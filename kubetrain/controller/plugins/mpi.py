"""MPIJob plugin (v2beta1): the hostfile and the launcher's and workers' environment.

The hostfile lists each worker once with its slots (``<host> slots=N`` for Open MPI,
``<host>:N`` for Intel MPI and MPICH), the launcher first when it also runs ranks.
The launcher is pointed at it through the MPI implementation's own variables; the
operator mounts it at ``/etc/mpi/hostfile``, ``kubetrain run --local`` writes it to a
temporary directory.
"""

from __future__ import annotations

from kubetrain.api.mpi import MPIImplementation, MPIJob, MPIReplicaType
from kubetrain.controller.plugins.addressing import Addressing, EnvVar, ReplicaRef, env_var
from kubetrain.controller.plugins.common import replicas_of

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
    """The injected variables for one replica (same signature as the other plugins)."""
    if replica_type == LAUNCHER:
        return launcher_env(job)
    if replica_type == WORKER:
        return worker_env(job)
    raise ValueError(
        f"replica type {replica_type!r} is not an MPIJob replica type: expected "
        f"{LAUNCHER!r} or {WORKER!r}"
    )
