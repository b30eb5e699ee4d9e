"""What a TrainJob ML policy is, as its module declares it (the shape of an entry of
:mod:`kubetrain.frameworks.registry`, as upstream Trainer's runtime plugins each implement
their small interfaces): its name, the containers that get its environment and that
environment, the port its trainer pods serve, and the variables a TrainJob may not set."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import Layout, ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar

#: The port of rank 0 (torch's master, the coordinator or tracker of the others) in
#: upstream's policies.
RENDEZVOUS_PORT = 29500

#: The variables of node ``index`` (an :class:`~kubetrain.frameworks.addressing.Addressing`
#: says where its peers are).
PolicyEnv = Callable[[ResolvedTrainJob, int, Addressing], list[EnvVar]]
#: Whether container ``container`` of replicated job ``replicated_job`` gets the policy's
#: environment.
EnvTarget = Callable[[ResolvedTrainJob, str, str], bool]


def trainer_node(job: ResolvedTrainJob, replicated_job: str, container: str) -> bool:
    """The trainer's ``node`` container: where upstream's policies inject their variables."""
    return replicated_job == job.spec.trainer_job and container == T.NODE


@dataclass(frozen=True, kw_only=True)
class TrainJobPolicy:
    """One ML policy (see the module docs)."""

    #: The policy's name: its ``mlPolicy`` field (``torch``), or for kubetrain's extension
    #: the runtime's ``trainer.kubeflow.org/framework`` label value.
    name: str
    #: The variables of node ``index`` of the containers :attr:`targets` selects.
    env: PolicyEnv
    #: The containers that get :attr:`env`. Default: the trainer's ``node`` container.
    targets: EnvTarget = trainer_node
    #: The port the trainer's pods serve (rank 0's rendezvous), or None for none.
    rank_port: int | None = None
    #: The variables of :attr:`env` a TrainJob's ``spec.trainer.env`` may not set: names
    #: from :mod:`kubetrain.api.trainer.constants`, whose ``ALL_RESERVED_ENV`` the CRD
    #: refuses. Default: none.
    reserved_env: tuple[str, ...] = ()
    #: Whether a runtime of this policy names it in ``mlPolicy`` (upstream's source field,
    #: ``torch: {}``: what a runtime construct writes by default). False where upstream
    #: has no such field and the runtime says its framework by label alone (kubetrain's
    #: TensorFlow). Default: it does.
    ml_policy_source: bool = True
    #: Where the policy puts a TrainJob's nodes when the trainer job should not run them
    #: all (MPI's launcher and nodes), for :func:`~kubetrain.api.trainer.resolve.resolve`.
    #: Default: none (the trainer job runs every node).
    layout: Layout | None = None

    def container_env(
        self,
        job: ResolvedTrainJob,
        replicated_job: str,
        container: str,
        index: int,
        addressing: Addressing,
    ) -> list[EnvVar]:
        """The policy's variables for ``container`` of pod ``index``, if it targets it."""
        if self.targets(job, replicated_job, container):
            return self.env(job, index, addressing)
        return []
