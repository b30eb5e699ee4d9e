"""Elastic jobs run locally, scaled while they train: one home for both kinds (a PyTorchJob
with an ``elasticPolicy``, a TrainJob whose torch policy is elastic).

Each node is a ``torchrun`` with the environment the operator injects (``PET_NNODES=min:max``,
a c10d rendezvous at node 0's port on ``127.0.0.1``). Node 0 hosts the rendezvous store, as
the pod whose host name is the endpoint does on a cluster: every process here is on the
endpoint's host, so the others are told not to (``is_host=0`` in ``PET_RDZV_CONF``).

A scale plan (``kubetrain run --local --scale 3@step=20 --scale 2@30s``) changes the node
count while the job trains, as a change of the scaled replica count (a PyTorchJob's Worker
``replicas``, a TrainJob's ``numNodes``) does on a cluster:

- up: the new nodes are planned as the operator would for the scaled job and started; their
  ``torchrun`` joins the rendezvous, the running agents see it waiting and restart their
  workers into a larger group (torchrun does not count that against ``maxRestarts``);
- down: the highest nodes are lost: their ``torchrun`` and its workers are killed (SIGKILL).
  Not SIGTERM: torch 2.5's agent then closes the whole rendezvous and every other node
  exits (pytorch/pytorch#150916, fixed by #152525). The others' workers fail their next
  collective, their agents restart them (one of ``maxRestarts``) into a smaller group.

Either way the job keeps running; the workers start again and resume from the last
checkpoint. The time from each decision to the first step of the re-formed group is
measured from the samples' log lines (``training: world_size=N``, ``step=N``) and reported.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

from kubetrain.api import env_names as E
from kubetrain.local.replica import LocalReplica, LocalRunError

LOCAL_HOSTS = ("127.0.0.1", "localhost")
#: torch 2.5's agents hand their workers the rendezvous store under the prefix
#: ``/worker/attempt_<restart count>``, and a membership change does not count as a restart:
#: a group re-formed after a scale-up reads the previous group's gloo addresses there and
#: fails to connect. With this set, rank 0 of each group hosts a new store on a free port.
UNSHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
#: Where the sample trainers checkpoint and resume (``images/common/trainkit.py``): a
#: re-formed group resumes from it, so a local elastic run gets one in its run directory.
CHECKPOINT_DIR = "CHECKPOINT_DIR"

_SCALE = re.compile(r"^(?P<nodes>\d+)@(?:step=(?P<step>\d+)|(?P<seconds>\d+(?:\.\d+)?)s?)$")
# The samples' lines (images/common/trainkit.py), also behind torchrun's "[rankN]:" prefix.
_WORLD = re.compile(r"(?:^|:)training: world_size=(?P<world>\d+) ")
_STEP = re.compile(r"(?:^|:)step=(?P<step>\d+) loss=")
_RESUME = re.compile(r"(?:^|:)resume step=(?P<step>\d+) ")


@dataclass(frozen=True, kw_only=True)
class ElasticGroup:
    """The nodes of an elastic job that a scale plan may change."""

    replica_type: str
    """The scaled replica type (a PyTorchJob's ``Worker``, a TrainJob's trainer job)."""
    low: int
    high: int
    nodes: int
    """Nodes at the start."""
    max_restarts: int | None
    """torchrun's ``--max-restarts`` (``PET_MAX_RESTARTS``), None when unset (3)."""
    rescale: Callable[[int], list[LocalReplica]]
    """The group's replicas for ``n`` nodes, planned as the operator plans the scaled job."""


def local_rendezvous(
    replicas: Sequence[LocalReplica], replica_type: str, checkpoints: Path
) -> list[LocalReplica]:
    """``replicas`` with node 0 of ``replica_type`` hosting the rendezvous store and the
    others joining it (unless ``PET_RDZV_CONF`` already says ``is_host``), each group's
    workers on a store of their own (:data:`UNSHARED_STORE`) and the samples'
    ``CHECKPOINT_DIR`` in ``checkpoints`` (both unless set)."""
    out = []
    for replica in replicas:
        if replica.replica_type != replica_type:
            out.append(replica)
            continue
        env = {UNSHARED_STORE: "1", CHECKPOINT_DIR: str(checkpoints), **replica.env}
        conf = env.get(E.PET_RDZV_CONF, "")
        if "is_host" not in {item.partition("=")[0].strip() for item in conf.split(",")}:
            host = f"is_host={1 if replica.index == 0 else 0}"
            env[E.PET_RDZV_CONF] = f"{conf},{host}" if conf else host
        out.append(replace(replica, env=env))
    return out


def check_elastic_env(where: str, replica: LocalReplica, low: int, high: int) -> None:
    """Refuse a node whose torchrun could not rendezvous here: ``PET_NNODES`` must be the
    bounds, the backend c10d and the endpoint on this machine."""
    env = replica.env
    problems = []
    if env.get(E.PET_NNODES) != f"{low}:{high}":
        problems.append(f"{E.PET_NNODES} is {env.get(E.PET_NNODES)!r}, expected '{low}:{high}'")
    if env.get(E.PET_RDZV_BACKEND, "c10d") != "c10d":
        problems.append(f"{E.PET_RDZV_BACKEND} is {env[E.PET_RDZV_BACKEND]!r}: only c10d runs here")
    host = env.get(E.PET_RDZV_ENDPOINT, "").rpartition(":")[0]
    if host not in LOCAL_HOSTS:
        problems.append(
            f"{E.PET_RDZV_ENDPOINT} is {env.get(E.PET_RDZV_ENDPOINT)!r}, not on this machine "
            "(remove elasticPolicy.rdzvHost to run it here)"
        )
    if problems:
        raise LocalRunError(f"{where} cannot run elastic here: {'; '.join(problems)}")


@dataclass(frozen=True, kw_only=True)
class ScaleAt:
    """One step of a scale plan: ``nodes`` once the job logs ``step`` (or after
    ``seconds``)."""

    nodes: int
    step: int | None = None
    seconds: float | None = None

    def __str__(self) -> str:
        return (
            f"{self.nodes}@step={self.step}"
            if self.step is not None
            else (f"{self.nodes}@{self.seconds:g}s")
        )


def parse_scale(text: str) -> ScaleAt:
    """``N@step=S`` (when the job logs step S) or ``N@Ts`` (T seconds after the start)."""
    match = _SCALE.match(text.strip())
    if match is None:
        raise LocalRunError(
            f"--scale {text!r} is not NODES@step=STEP or NODES@SECONDS "
            "(e.g. --scale 3@step=20, --scale 2@45s)"
        )
    step, seconds = match.group("step"), match.group("seconds")
    return ScaleAt(
        nodes=int(match.group("nodes")),
        step=int(step) if step is not None else None,
        seconds=float(seconds) if seconds is not None else None,
    )


def check_scale_plan(plan: Sequence[ScaleAt], group: ElasticGroup | None, job: str) -> None:
    """Refuse a plan the job cannot follow, saying which entry, its value and what fits."""
    if not plan:
        return
    if group is None:
        raise LocalRunError(
            f"--scale needs an elastic job: {job} is not (a PyTorchJob needs "
            "spec.elasticPolicy; a TrainJob, a runtime whose torch policy is elastic)"
        )
    nodes, last_step, last_seconds, removals = group.nodes, 0, 0.0, 0
    for entry in plan:
        if not group.low <= entry.nodes <= group.high:
            raise LocalRunError(
                f"--scale {entry}: {entry.nodes} nodes is outside the job's elastic bounds "
                f"{group.low}..{group.high} (elasticPolicy min/max)"
            )
        if entry.nodes == nodes:
            raise LocalRunError(f"--scale {entry}: the job already has {nodes} nodes then")
        if entry.step is not None and entry.step <= last_step:
            raise LocalRunError(
                f"--scale {entry}: step {entry.step} must come after step {last_step}, "
                "the previous entry's"
            )
        if entry.seconds is not None and entry.seconds <= last_seconds:
            raise LocalRunError(
                f"--scale {entry}: {entry.seconds:g}s must come after {last_seconds:g}s, "
                "the previous entry's"
            )
        removals += entry.nodes < nodes
        nodes = entry.nodes
        last_step = entry.step if entry.step is not None else last_step
        last_seconds = entry.seconds if entry.seconds is not None else last_seconds
    allowed = group.max_restarts if group.max_restarts is not None else 3
    if removals > allowed:
        raise LocalRunError(
            f"--scale removes nodes {removals} times but torchrun restarts the others only "
            f"{allowed} times (elasticPolicy.maxRestarts): raise maxRestarts to {removals}"
        )


@dataclass(kw_only=True)
class Rescale:
    """One scale decision and how long the group took to train again."""

    from_nodes: int
    to_nodes: int
    world_size: int | None
    """The world size expected after it (None when ``PET_NPROC_PER_NODE`` is not a number)."""
    decided: float
    """Seconds since the run started."""
    reformed_after: float | None = None
    """Seconds from the decision to the re-formed group's first step (None: not seen)."""
    resumed_step: int | None = None
    """The step the re-formed group resumed after (its ``resume step=`` line)."""
    _world_seen: bool = field(default=False, repr=False)


class Scaler:
    """Follows a scale plan during a run: says when a step is due, watches the log lines
    for the step count and for the re-formed group."""

    def __init__(
        self, group: ElasticGroup, plan: Sequence[ScaleAt], nproc: str, started: float
    ) -> None:
        self.group = group
        self.nodes = group.nodes
        self._plan = list(plan)
        self._nproc = int(nproc) if nproc.isdigit() else None
        self._started = started
        self._step = 0
        self._lock = threading.Lock()
        self.rescales: list[Rescale] = []

    def observe(self, line: str, now: float) -> Rescale | None:
        """Read one output line; return the rescale it shows re-formed, if it does."""
        with self._lock:
            if (step := _STEP.search(line)) is not None:
                self._step = int(step.group("step"))
            if not self.rescales or self.rescales[-1].reformed_after is not None:
                return None
            pending = self.rescales[-1]
            if (world := _WORLD.search(line)) is not None:
                pending._world_seen = pending.world_size in (None, int(world.group("world")))
            elif (resume := _RESUME.search(line)) is not None:
                # Rank 0 prints it as it starts again, before its training line.
                pending.resumed_step = int(resume.group("step"))
            elif step is not None and pending._world_seen:
                pending.reformed_after = now - self._started - pending.decided
                return pending
            return None

    def due(self, now: float) -> ScaleAt | None:
        """The next plan entry once its time has come, or once its step was logged by the
        group the previous entry formed."""
        with self._lock:
            if not self._plan:
                return None
            entry = self._plan[0]
            forming = bool(self.rescales) and self.rescales[-1].reformed_after is None
            # A step counts once the previous change has re-formed: the step is the new group's.
            if entry.step is not None and (forming or self._step < entry.step):
                return None
            if entry.seconds is not None and now - self._started < entry.seconds:
                return None
            self._plan.pop(0)
            self.rescales.append(
                Rescale(
                    from_nodes=self.nodes,
                    to_nodes=entry.nodes,
                    world_size=entry.nodes * self._nproc if self._nproc else None,
                    decided=now - self._started,
                )
            )
            self.nodes = entry.nodes
            return entry


def describe(rescale: Rescale) -> str:
    """The progress line of a re-formed group."""
    resumed = f", resumed after step {rescale.resumed_step}" if rescale.resumed_step else ""
    return (
        f"elastic: {rescale.from_nodes} -> {rescale.to_nodes} nodes re-formed in "
        f"{rescale.reformed_after:.1f}s (decision to the first step at "
        f"world_size={rescale.world_size}{resumed})"
    )


def _children(pid: int) -> list[int]:
    """The direct children of ``pid`` (torchrun's workers, each in a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            stat = (entry / "stat").read_text()
            # The fields after the command's closing parenthesis: state, then the parent.
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def lose_node(pid: int) -> None:
    """Kill a node as if its machine went away: its torchrun (``pid``, leader of its process
    group) and the workers it started in sessions of their own."""
    workers = _children(pid)
    for group in (pid, *workers):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
