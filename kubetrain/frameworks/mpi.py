"""MPI (``MPIJob`` v2beta1: Horovod, DeepSpeed, nccl-tests): every rule of the framework,
stated once.

- Roles: ``launcher`` and ``worker``.
- Environment: the launcher's first container is pointed at the hostfile through the MPI
  implementation's own variables; workers get ``K_MPI_JOB_ROLE``. The hostfile lists each
  worker once with its slots (``<host> slots=N`` for Open MPI, ``<host>:N`` for Intel MPI
  and MPICH), the launcher (host name ``<job>-launcher``) first when it also runs ranks;
  ``discover_hosts.sh`` prints the same hosts bare, for those that can take ranks now.
  The operator mounts both under ``/etc/mpi``, ``kubetrain run --local`` writes the
  hostfile to a scratch directory (the addressing says where).
- Start order: the launcher starts once every worker is Ready.
- Success: the launcher succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import MPI
from kubetrain.api.mpi import MPIImplementation, MPIJob, MPIReplicaType
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import LAUNCHER as TRAINJOB_LAUNCHER
from kubetrain.api.trainer.resolve import NODE_JOB as TRAINJOB_NODE
from kubetrain.api.trainer.resolve import NodeLayout, ResolvedTrainJob
from kubetrain.api.trainer.runtime import MLPolicy
from kubetrain.frameworks.addressing import (
    Addressing,
    EnvVar,
    env_var,
    replica_name,
    trainjob_pod_name,
)
from kubetrain.frameworks.base import Done, StartAfter, typed_as
from kubetrain.frameworks.policy import TrainJobPolicy
from kubetrain.frameworks.replicas import replicas_of
from kubetrain.frameworks.trainjob_nodes import gpus_per_node

LAUNCHER = MPIReplicaType.LAUNCHER.value
WORKER = MPIReplicaType.WORKER.value
#: Where the operator mounts the job's ConfigMap in the launcher.
CONFIG_MOUNT_PATH = "/etc/mpi"
#: The hostfile's name (its ConfigMap key; ``kubetrain run --local`` writes it to a
#: scratch directory).
HOSTFILE = "hostfile"
HOSTFILE_PATH = f"{CONFIG_MOUNT_PATH}/{HOSTFILE}"
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


def launcher_hostname(job_name: str) -> str:
    """The launcher pod's host name, ``<job>-launcher`` (also its Job's name)."""
    return f"{job_name}-{LAUNCHER.lower()}"


def hostnames(job: MPIJob, workers: Sequence[int] | None = None) -> list[str]:
    """The host names of the pods that run ranks: the launcher first when it does, then
    the workers (``workers``: which indexes; every worker when None)."""
    names = [launcher_hostname(job.name)] if job.spec.run_launcher_as_worker else []
    if workers is None:
        workers = range(replicas_of(job.spec.mpi_replica_specs.get(MPIReplicaType.WORKER)))
    return names + [replica_name(job.name, WORKER, i) for i in workers]


def _hosts(job: MPIJob, addressing: Addressing, names: Sequence[str]) -> list[str]:
    namespace = job.metadata.namespace or "default"
    return [addressing.mpi_host(n, job_name=job.name, namespace=namespace) for n in names]


def _hostfile_text(hosts: Sequence[str], slots: int, separator: str = " slots=") -> str:
    """One line per host with its slots (``separator``: Open MPI's `` slots=``)."""
    # Replicas that share a host (every one of them, run locally) become one line with
    # their slots added up: Open MPI rejects a host listed twice with slot counts.
    counts: dict[str, int] = {}
    for host in hosts:
        counts[host] = counts.get(host, 0) + slots
    return "".join(f"{host}{separator}{count}\n" for host, count in counts.items())


def hostfile(job: MPIJob, addressing: Addressing) -> str:
    """The hostfile text: one line per host, launcher first if it runs ranks."""
    separator = " slots=" if implementation(job) is MPIImplementation.OPEN_MPI else ":"
    hosts = _hosts(job, addressing, hostnames(job))
    return _hostfile_text(hosts, slots_per_worker(job), separator)


def discover_hosts(job: MPIJob, addressing: Addressing, running_workers: Sequence[int]) -> str:
    """``discover_hosts.sh`` (Horovod elastic): prints the hosts that can take ranks now,
    bare, one a line (the launcher when it runs ranks, then the running workers)."""
    hosts = _hosts(job, addressing, hostnames(job, running_workers))
    return "#!/bin/sh\n" + "".join(f"echo {host}\n" for host in dict.fromkeys(hosts))


def sshd_replica_types(job: JobBase) -> tuple[str, ...]:
    """The replicas that only serve sshd to the launcher, whose ``mpirun`` starts the ranks
    on them: an MPIJob's workers, the ``node`` pods of a TrainJob with an MPI policy."""
    if isinstance(job, MPIJob):
        return (WORKER,)
    if isinstance(job, ResolvedTrainJob) and job.spec.mpi is not None:
        return (TRAINJOB_NODE,)
    return ()


def _typed(job: JobBase) -> MPIJob:
    return typed_as(job, MPIJob, "MPI")


def launcher_env(job: MPIJob, hostfile_path: str = HOSTFILE_PATH) -> list[EnvVar]:
    """The variables injected into the launcher's first container."""
    slots = slots_per_worker(job)
    env = [env_var(E.MPI_JOB_ROLE, "launcher")]
    impl = implementation(job)
    if impl is MPIImplementation.OPEN_MPI:
        env += [
            env_var(E.OMPI_KEEP_FQDN_HOSTNAMES, "true"),
            env_var(E.OMPI_HOSTFILE, hostfile_path),
            env_var(E.OMPI_RSH_ARGS, SSH_ARGS),
            env_var(E.OMPI_SET_DEFAULT_SLOTS, slots),
        ]
    elif impl is MPIImplementation.INTEL:
        env += [
            env_var(E.INTEL_MPI_HOSTFILE, hostfile_path),
            env_var(E.INTEL_MPI_BOOTSTRAP_ARGS, SSH_ARGS),
            env_var(E.INTEL_MPI_PERHOST, slots),
        ]
    else:
        env += [
            env_var(E.MPICH_HOSTFILE, hostfile_path),
            env_var(E.MPICH_LAUNCH_ARGS, SSH_ARGS),
        ]
    if not job.spec.run_launcher_as_worker:
        # The launcher only runs mpirun: keep GPUs on its node free for workers.
        env += [env_var(E.NVIDIA_VISIBLE_DEVICES, ""), env_var(E.NVIDIA_DRIVER_CAPABILITIES, "")]
    return env


def worker_env(job: MPIJob) -> list[EnvVar]:
    """The variables injected into each worker's first container."""
    return [env_var(E.MPI_JOB_ROLE, "worker")]


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


# -- TrainJob (Kubeflow Trainer v2's MPI policy: OpenMPI only) --------------------------------


def trainjob_slots(job: ResolvedTrainJob) -> int:
    """Slots per node: ``spec.trainer.numProcPerNode``, else the runtime's
    ``mpi.numProcPerNode``; a runtime value of 1 on multi-GPU nodes means one per GPU."""
    if job.spec.num_proc_per_node is not None:
        return job.spec.num_proc_per_node
    runtime = (job.spec.mpi.num_proc_per_node if job.spec.mpi is not None else None) or 1
    gpus = gpus_per_node(job)
    return gpus if runtime == 1 and gpus > 1 else runtime


def trainjob_hostfile(job: ResolvedTrainJob, addressing: Addressing) -> str:
    """The hostfile: the launcher first when it runs ranks, then every ``node`` pod."""
    namespace = job.metadata.namespace or "default"
    names = []
    if job.spec.mpi is not None and job.spec.mpi.run_launcher_as_node:
        names.append(trainjob_pod_name(job.name, TRAINJOB_LAUNCHER, 0))
    names += [
        trainjob_pod_name(job.name, TRAINJOB_NODE, i) for i in range(job.pods_of(TRAINJOB_NODE))
    ]
    hosts = [addressing.mpi_host(n, job_name=job.name, namespace=namespace) for n in names]
    return _hostfile_text(hosts, trainjob_slots(job))


def trainjob_launcher_env(
    job: ResolvedTrainJob, hostfile_path: str = HOSTFILE_PATH
) -> list[EnvVar]:
    """The launcher's OpenMPI variables (upstream v2.3.0's)."""
    return [
        env_var(E.OMPI_HOSTFILE, hostfile_path or HOSTFILE_PATH),
        env_var(E.OMPI_KEEP_FQDN_HOSTNAMES, "true"),
        env_var(E.OMPI_SET_DEFAULT_SLOTS, trainjob_slots(job)),
        env_var(E.OMPI_RSH_ARGS, SSH_ARGS),
    ]


def _trainjob_env(job: ResolvedTrainJob, index: int, addressing: Addressing) -> list[EnvVar]:
    return trainjob_launcher_env(job, addressing.mpi_hostfile)


def _trainjob_targets(job: ResolvedTrainJob, replicated_job: str, container: str) -> bool:
    """The launcher's ``node`` container (the nodes serve sshd to its ``mpirun``)."""
    return replicated_job == TRAINJOB_LAUNCHER and container == T.NODE


def node_layout(policy: MLPolicy, names: list[str], nodes: int) -> NodeLayout:
    """Upstream's MPI layout: the launcher runs one pod and ``node`` the nodes (``nodes -
    1`` with ``runLauncherAsNode``, when the launcher is a node and gets the trainer's
    ``resourcesPerNode`` in the ``node`` job too); the launcher's success is the
    TrainJob's (the nodes serve sshd and never end). The runtime needs both jobs (``node``
    only for more than one node)."""
    as_node = bool(policy.mpi and policy.mpi.run_launcher_as_node)
    problem = None
    if TRAINJOB_LAUNCHER not in names or (TRAINJOB_NODE not in names and nodes > 1):
        problem = (
            f"an MPI runtime with a {TRAINJOB_LAUNCHER} replicated job and a {TRAINJOB_NODE} one"
        )
    return NodeLayout(
        pods={TRAINJOB_LAUNCHER: 1, TRAINJOB_NODE: nodes - 1 if as_node else nodes},
        trainer_resources=(TRAINJOB_NODE,) if as_node else (),
        success_targets=(TRAINJOB_LAUNCHER,) if TRAINJOB_LAUNCHER in names else None,
        problem=problem,
    )


POLICY = TrainJobPolicy(
    name="mpi",
    env=_trainjob_env,
    targets=_trainjob_targets,
    layout=node_layout,
    reserved_env=(
        E.OMPI_HOSTFILE,
        E.OMPI_RSH_ARGS,
        E.OMPI_KEEP_FQDN_HOSTNAMES,
        E.OMPI_SET_DEFAULT_SLOTS,
    ),
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
