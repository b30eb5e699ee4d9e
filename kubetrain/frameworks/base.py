"""What a framework is: the pure rules of one training framework, which the operator's
plugin, ``kubetrain run --local`` and the constructs all call, so none of them decides
them again.

A framework knows, for a (defaulted) job of its kind:

- ``roles``: the ``job-role`` label of each replica (``master``, ``launcher``, ...);
- ``container_env``: the environment one container of one replica gets (and which
  container gets it), given an :class:`~kubetrain.frameworks.addressing.Addressing`;
- ``start_order``: which replicas must be Ready before which others are started;
- ``succeeded``: whether the replicas that finished make the job Succeeded (and why), from
  a predicate ``done(replica type, index)`` that the operator answers from pods and the
  local runner from exit codes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.frameworks.addressing import Addressing, EnvVar, replica_name
from kubetrain.frameworks.replicas import replicas_of

J = TypeVar("J", bound=JobBase)

#: ``done(replica type, index)``: whether that replica finished successfully.
Done = Callable[[str, int], bool]


@dataclass(frozen=True)
class StartAfter:
    """The replicas of ``waiting`` start only once every replica in ``needed`` (type,
    index) is Ready and reachable (``until="Complete"``: has succeeded, e.g. a TrainJob's
    initializers). The labels say it in words for messages."""

    waiting: tuple[str, ...]
    needed: tuple[tuple[str, int], ...]
    waiting_label: str
    needed_label: str
    until: str = "Ready"


class Framework(Protocol):
    """One framework's rules (see the module docs)."""

    @property
    def info(self) -> KindInfo:
        """The kind this framework's jobs are."""
        ...

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        """The ``training.kubeflow.org/job-role`` label of a replica, if it has one."""
        ...

    def container_env(
        self,
        job: JobBase,
        replica_type: str,
        index: int,
        container: Mapping[str, Any],
        addressing: Addressing,
    ) -> list[EnvVar]:
        """The variables injected into ``container`` of replica ``replica_type``-``index``
        (empty for a container that gets none)."""
        ...

    def run_container(self, job: JobBase, replica_type: str) -> str | None:
        """The name of the container that runs the replica's program (None: the first)."""
        ...

    def start_order(self, job: JobBase) -> list[StartAfter]:
        """Which replicas wait for which others to be Ready before they start."""
        ...

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        """Why the job has succeeded (e.g. ``job-master-0 completed``), or None."""
        ...


def leader_first(job: JobBase, leaders: tuple[str, ...]) -> str | None:
    """The first of ``leaders`` the job has (with at least one replica)."""
    specs = job.replica_specs()
    return next((t for t in leaders if t in specs and replicas_of(specs[t]) > 0), None)


def present(job: JobBase, types: tuple[str, ...]) -> tuple[str, ...]:
    """The types of ``types`` the job has, with at least one replica, in that order."""
    specs = job.replica_specs()
    return tuple(t for t in types if t in specs and replicas_of(specs[t]) > 0)


def after_leader(
    job: JobBase, leaders: tuple[str, ...], waiting_types: tuple[str, ...]
) -> list[StartAfter]:
    """The workers (the replicas of ``waiting_types`` the job has) start once replica 0 of
    its first leader (of ``leaders``) is Ready; nothing waits without either."""
    leader = leader_first(job, leaders)
    waiting = present(job, waiting_types)
    if leader is None or not waiting:
        return []
    return [
        StartAfter(
            waiting=waiting,
            needed=((leader, 0),),
            waiting_label="the workers",
            needed_label=f"the {leader.lower()} ({replica_name(job.name, leader, 0)})",
        )
    ]


def replica_counts(job: JobBase) -> Mapping[str, int]:
    """Replicas per type after defaulting."""
    return {t: replicas_of(s) for t, s in job.replica_specs().items()}


def typed_as(job: JobBase, model: type[J], framework: str) -> J:
    """``job`` as ``model`` (the kind ``framework`` serves); TypeError for another kind."""
    if not isinstance(job, model):
        raise TypeError(f"the {framework} framework takes only {model.__name__}s (got {job.kind})")
    return job


class WholeEnvFramework(ABC, Generic[J]):
    """The frame of the frameworks whose upstream controller gives every container of a
    replica the whole environment and runs the program in the kind's main container
    (PyTorch's and most others'): a subclass names its kind (``info``, ``model``,
    ``name``) and its environment (``replica_env``), and says ``role`` and ``succeeded``;
    nothing waits for anything unless it overrides ``start_order``."""

    info: KindInfo
    model: type[J]
    #: The framework's name in messages (``PyTorch``).
    name: str

    def typed(self, job: JobBase) -> J:
        return typed_as(job, self.model, self.name)

    @abstractmethod
    def replica_env(
        self, job: J, replica_type: str, index: int, addressing: Addressing
    ) -> list[EnvVar]:
        """The variables of replica ``replica_type``-``index`` (every container gets them):
        each subclass states its kind's (a framework without it cannot be made)."""

    def container_env(
        self,
        job: JobBase,
        replica_type: str,
        index: int,
        container: Mapping[str, Any],
        addressing: Addressing,
    ) -> list[EnvVar]:
        """Every container of the replica gets the whole environment."""
        return self.replica_env(self.typed(job), replica_type, index, addressing)

    def run_container(self, job: JobBase, replica_type: str) -> str | None:
        return self.info.main_container

    def start_order(self, job: JobBase) -> list[StartAfter]:
        return []
