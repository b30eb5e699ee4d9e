"""The children of the MPI launcher/worker contract, made alike for an MPIJob and a
TrainJob with an MPI policy (the pods' side is :mod:`kubetrain.frameworks.mpi_pods`):

- the SSH key pair's Secret ``<prefix><suffix from the job's uid>``
  (``sshkeys.ssh_secret_name``), created first and alone in the job's first reconcile
  and its name recorded in the job's status: the operator never needs to read a Secret
  (it may only create them), and every pass computes the same name, so it never makes
  two when a create's answer is lost (a 409 is its own earlier create);
- the ConfigMap the launcher mounts at ``/etc/mpi`` (the hostfile, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubetrain.api.common import JobBase
from kubetrain.controller.model import Observed
from kubetrain.controller.plugins import children
from kubetrain.controller.sshkeys import SshKeyPair, generate_ssh_keys, ssh_secret, ssh_secret_name
from kubetrain.frameworks import ClusterAddressing, mpi


class MpiChildren:
    """A plugin's part for the MPI contract: its addressing (host names in the hostfile)
    and the key pairs' source."""

    def __init__(
        self,
        addressing: ClusterAddressing | None = None,
        keygen: Callable[[], SshKeyPair] = generate_ssh_keys,
    ) -> None:
        self.addressing = addressing or ClusterAddressing()
        self.keygen = keygen

    def serving_replica_types(self, job: JobBase) -> tuple[str, ...]:
        """The replicas that run sshd for the launcher's mpirun: once it is done they have
        nothing left to finish."""
        return mpi.sshd_replica_types(job)

    def ssh_secret_name(self, job: JobBase, observed: Observed, prefix: str) -> str:
        """The job's SSH Secret: as its status records it (jobs started by an operator
        that chose a random suffix keep theirs), else ``prefix`` and the uid's suffix."""
        return observed.ssh_secret_name or ssh_secret_name(prefix, children.uid_of(job))

    def ssh_secret(
        self, job: JobBase, observed: Observed, name: str, labels: Mapping[str, str]
    ) -> Iterator[dict[str, Any]]:
        """The Secret ``name`` with a new key pair, unless it exists (it is created once,
        never updated)."""
        if name not in observed.secrets:
            yield ssh_secret(children.metadata(job, name, labels), self.keygen())


def config_map(
    job: JobBase, name: str, labels: Mapping[str, str], data: Mapping[str, str]
) -> dict[str, Any]:
    """The ConfigMap the launcher mounts (``data``: file name to text)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": children.metadata(job, name, labels),
        "data": dict(data),
    }
