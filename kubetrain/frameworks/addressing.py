"""How replicas are addressed: the one thing that differs between the operator's pods and
``kubetrain run --local``'s processes.

The frameworks compute every environment variable and the MPI hostfile from a job plus
an :class:`Addressing`. The operator passes :class:`ClusterAddressing` (the DNS names of
the per-replica headless Services, the ports the containers declare, the hostfile where
the operator mounts it); ``kubetrain run --local`` passes :class:`LocalAddressing` (the
loopback address, a distinct free port per replica, a hostfile in a scratch directory).
Everything else is the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Required, TypedDict


class EnvVar(TypedDict, total=False):
    """A Kubernetes ``EnvVar``: a literal ``value``, or ``valueFrom`` (a field of the pod)."""

    name: Required[str]
    value: str
    valueFrom: dict[str, Any]


def env_var(name: str, value: str | int) -> EnvVar:
    """An :class:`EnvVar` (integers are written in decimal)."""
    return {"name": name, "value": str(value)}


@dataclass(frozen=True, kw_only=True)
class ReplicaRef:
    """One replica of a job: ``<job>-<replica type, lowercased>-<index>``."""

    job_name: str
    namespace: str
    replica_type: str
    index: int

    @property
    def pod_name(self) -> str:
        """The pod (and per-replica Service) name the operator gives this replica."""
        return replica_name(self.job_name, self.replica_type, self.index)


def replica_name(job_name: str, replica_type: str, index: int) -> str:
    """``<job>-<replica type, lowercased>-<index>``: a replica's pod name everywhere."""
    return f"{job_name}-{replica_type.lower()}-{index}"


def trainjob_pod_name(job_name: str, replicated_job: str, index: int) -> str:
    """``<trainjob>-<replicated job>-0-<index>``: a TrainJob pod's name and host name (what
    JobSet names the pod's host, its one Job being index 0)."""
    return f"{job_name}-{replicated_job}-0-{index}"


class Addressing(Protocol):
    """Resolves replicas to the host names and ports their peers use to reach them."""

    def replica_host(self, replica: ReplicaRef, *, qualified: bool) -> str:
        """The host of a replica's own headless Service.

        ``qualified`` asks for ``<pod>.<namespace>.svc`` (TFJob) instead of the bare
        Service name (PyTorchJob's ``MASTER_ADDR``).
        """
        ...

    def replica_port(self, replica: ReplicaRef, declared: int) -> int:
        """The port a replica listens on, given the port its container declares."""
        ...

    def mpi_host(self, hostname: str, *, job_name: str, namespace: str) -> str:
        """An MPIJob pod's host as written in the hostfile and ``discover_hosts.sh``,
        given the pod's ``hostname`` (``<job>-worker-<i>``, or ``<job>-launcher``)."""
        ...

    def trainjob_host(self, job_name: str, replicated_job: str, index: int) -> str:
        """The host of a TrainJob pod (``<pod>.<trainjob>``: its host name under the
        TrainJob's headless Service, completed by the pod's DNS search path)."""
        ...

    @property
    def mpi_hostfile(self) -> str:
        """Where the MPI launcher finds its hostfile."""
        ...


@dataclass(frozen=True, kw_only=True)
class ClusterAddressing:
    """Cluster DNS names, as the operator injects them.

    ``cluster_domain``, when set (e.g. ``cluster.local``), is appended to qualified
    names; by default they end in ``.svc`` and the pod's DNS search path completes them.
    """

    cluster_domain: str = ""
    #: Where the operator mounts an MPIJob's ConfigMap in the launcher.
    mpi_hostfile: str = "/etc/mpi/hostfile"

    def _suffix(self) -> str:
        return f".{self.cluster_domain}" if self.cluster_domain else ""

    def replica_host(self, replica: ReplicaRef, *, qualified: bool) -> str:
        if not qualified:
            return replica.pod_name
        return f"{replica.pod_name}.{replica.namespace}.svc{self._suffix()}"

    def replica_port(self, replica: ReplicaRef, declared: int) -> int:
        return declared

    def mpi_host(self, hostname: str, *, job_name: str, namespace: str) -> str:
        # Pods are reached through the job's headless Service (hostname + subdomain).
        return f"{hostname}.{job_name}.{namespace}.svc{self._suffix()}"

    def trainjob_host(self, job_name: str, replicated_job: str, index: int) -> str:
        return f"{trainjob_pod_name(job_name, replicated_job, index)}.{job_name}"

    def dns_search(self, job_name: str, namespace: str) -> str:
        """The search domain MPI workers get so that Hydra proxies (Intel MPI, MPICH)
        reach the launcher by its bare host name (``cluster.local`` when no domain is
        configured, as upstream writes it)."""
        return f"{job_name}.{namespace}.svc.{self.cluster_domain or 'cluster.local'}"


@dataclass(frozen=True, kw_only=True)
class LocalAddressing:
    """Every replica on this machine: one loopback host, a distinct port each.

    ``ports`` maps ``(replica type, index)`` to the port that replica listens on;
    replicas not in it keep their declared port. MPI workers are all ``localhost``, so
    the hostfile gives ``mpirun`` local slots and it starts the ranks without SSH.
    """

    host: str = "127.0.0.1"
    mpi_local_host: str = "localhost"
    ports: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: The hostfile ``kubetrain run --local`` writes for an MPIJob's launcher.
    mpi_hostfile: str = ""

    def replica_host(self, replica: ReplicaRef, *, qualified: bool) -> str:
        return self.host

    def replica_port(self, replica: ReplicaRef, declared: int) -> int:
        return self.ports.get((replica.replica_type, replica.index), declared)

    def mpi_host(self, hostname: str, *, job_name: str, namespace: str) -> str:
        return self.mpi_local_host

    def trainjob_host(self, job_name: str, replicated_job: str, index: int) -> str:
        return self.host
