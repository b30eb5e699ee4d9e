"""Planning a local run: the processes that run a job on this machine, with the
environment the operator would inject, computed by the job's framework
(:mod:`kubetrain.frameworks`) with a :class:`~kubetrain.frameworks.LocalAddressing`:
every replica on ``127.0.0.1`` with a free port of its own. For an MPIJob only the
launcher runs: the hostfile is written as the operator writes it, with this machine's
slots, so the launcher's real ``mpirun`` starts the ranks locally instead of over SSH.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubetrain.api import MPIJob, PyTorchJob, apply_defaults
from kubetrain.api.common import JobBase
from kubetrain.api.loader import Job, load_job
from kubetrain.frameworks import (
    Framework,
    LocalAddressing,
    framework_for,
    mpi,
    pytorch,
    replica_name,
)
from kubetrain.frameworks.replicas import main_container, replicas_of
from kubetrain.local.elastic import ElasticGroup, check_elastic_env, local_rendezvous
from kubetrain.local.replica import LocalReplica as LocalReplica
from kubetrain.local.replica import LocalRunError as LocalRunError

_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@dataclass(frozen=True, kw_only=True)
class LocalPlan:
    """Everything needed to run a job locally."""

    job: JobBase
    """The job as its framework reads it (defaulted; a TrainJob resolved against its
    runtime)."""
    framework: Framework
    """The job's rules: start order and success, as the operator applies them."""
    replicas: list[LocalReplica]
    files: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    absent: frozenset[tuple[str, int]] = frozenset()
    """Replicas the job has but that do not run here (an MPI worker, which only serves
    sshd to the launcher): counted as Ready and done by the start order and success rule."""
    success_phase: str = "Succeeded"
    """What the kind calls success (``Succeeded``; a TrainJob's condition is ``Complete``)."""
    elastic: ElasticGroup | None = None
    """The nodes a scale plan may change, when the job is elastic."""

    def succeeded(self, exit_codes: Mapping[tuple[str, int], int | None]) -> str | None:
        """Why the job has succeeded given the replicas' exit codes, by the framework's
        rule (the one the operator applies to pods); None while it has not."""
        return self.framework.succeeded(
            self.job,
            lambda rtype, index: (
                (rtype, index) in self.absent or exit_codes.get((rtype, index)) == 0
            ),
        )


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that are free on ``host`` right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def expand_references(value: str, env: Mapping[str, str]) -> str:
    """Expand ``$(VAR)`` the way the kubelet does in command and args.

    ``$$`` is a literal ``$``; a reference to an undefined variable is left as written.
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _VAR_REF.sub(replace, value)


def pod_fields(pod_name: str, namespace: str, **extra: str) -> dict[str, str]:
    """The ``fieldRef`` paths run --local resolves: the pod's name and namespace, plus
    ``extra`` (e.g. an annotation's path)."""
    return {"metadata.name": pod_name, "metadata.namespace": namespace, **extra}


def manifest_env(
    container: Mapping[str, Any], *, where: str, fields: Mapping[str, str]
) -> dict[str, str]:
    """The container's own ``env``, in order, ``$(VAR)`` expanded as the kubelet does;
    ``valueFrom.fieldRef`` is read from ``fields`` (see :func:`pod_fields`)."""
    if container.get("envFrom"):
        raise LocalRunError(
            f"{where}: envFrom is not supported by run --local (it reads ConfigMaps and "
            "Secrets from a cluster); set the variables with env or --env NAME=VALUE"
        )
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        name = str(item.get("name", ""))
        if "value" in item or "valueFrom" not in item:
            env[name] = expand_references(str(item.get("value", "")), env)
            continue
        field_path = str((item["valueFrom"].get("fieldRef") or {}).get("fieldPath"))
        if field_path in fields:
            env[name] = fields[field_path]
        else:
            raise LocalRunError(
                f"{where}: env {name} uses valueFrom {item['valueFrom']!r}, which run --local "
                f"cannot resolve (only fieldRef {', '.join(fields)}); "
                "set it with --env NAME=VALUE"
            )
    return env


def _no_command(where: str, container: Mapping[str, Any]) -> str:
    return (
        f"{where}: the container has no command, so it runs its image's "
        "entrypoint, which run --local cannot know; add a command to the manifest "
        "or pass --entrypoint 'python -m images.tensorflow.train'"
    )


def command_of(
    container: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    where: str,
    entrypoint: list[str],
    no_command: Callable[[str, Mapping[str, Any]], str] = _no_command,
) -> list[str]:
    """The container's command and args with ``$(VAR)`` expanded (``entrypoint`` stands in
    for an image's entrypoint when the container has no command; without one,
    :class:`LocalRunError` says ``no_command(where, container)``)."""
    command = [str(part) for part in container.get("command") or []]
    args = [str(part) for part in container.get("args") or []]
    if not command:
        if not entrypoint:
            raise LocalRunError(no_command(where, container))
        command = list(entrypoint)
    return [expand_references(part, env) for part in command + args]


@dataclass(frozen=True, kw_only=True)
class LocalPod:
    """A pod the job would have on a cluster, with what its kind sets for it locally."""

    replica_type: str
    index: int
    name: str
    fields: Mapping[str, str] = field(default_factory=dict)
    """``fieldRef`` paths resolved beyond the pod's name and namespace."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Set after the injected variables, before ``--env`` (a TrainJob node's GPU slice)."""
    env_defaults: Mapping[str, str] = field(default_factory=dict)
    """Set where nothing else sets them (torchrun's rank prefixes)."""


@dataclass(frozen=True, kw_only=True)
class LocalKind:
    """What a kind adds to the shared planning; the defaults are the v1 kinds'."""

    success_phase: str = "Succeeded"
    """What the kind calls success (a TrainJob's condition is ``Complete``)."""
    optional_steps: frozenset[str] = frozenset()
    """Replica types skipped, and counted as done, when their container has no command
    (a TrainJob's initializers, which would run their image's entrypoint)."""
    prepare: Callable[[Mapping[str, Any]], Mapping[str, Any]] = dict
    """The container as the pod runs it (a TrainJob's gets ``JOB_COMPLETION_INDEX``)."""
    no_command: Callable[[str, Mapping[str, Any]], str] = _no_command
    """The message when a container has no command and no --entrypoint is given."""


@dataclass(frozen=True, kw_only=True)
class Launcher:
    """An MPI job run through its launcher only: its ``mpirun`` starts every rank here
    from a hostfile, so the pods that only serve sshd to it are not started."""

    not_run_here: frozenset[str]
    """The replica types that only serve sshd (counted as Ready and done)."""
    hostfile: str
    note: str


def local_addressing(
    pods: Sequence[LocalPod], ports: Sequence[int] | None, scratch: Path
) -> LocalAddressing:
    """Every pod on ``127.0.0.1`` with a port of its own (``ports``, else free ones) and the
    MPI hostfile in ``scratch``."""
    chosen = list(ports) if ports is not None else free_ports(len(pods))
    if len(chosen) < len(pods):
        raise LocalRunError(f"{len(pods)} ports are needed, {len(chosen)} were given")
    return LocalAddressing(
        ports={(p.replica_type, p.index): port for p, port in zip(pods, chosen, strict=False)},
        mpi_hostfile=str(scratch / mpi.HOSTFILE),
    )


def plan_pods(
    job: JobBase,
    framework: Framework,
    pods: Sequence[LocalPod],
    *,
    addressing: LocalAddressing,
    entrypoint: Sequence[str],
    extra_env: Mapping[str, str] | None,
    notes: Sequence[str] = (),
    launcher: Launcher | None = None,
    kind: LocalKind = LocalKind(),
) -> LocalPlan:
    """The plan that runs ``pods`` of ``job`` (defaulted, or a resolved TrainJob), each
    its main container's command with the manifest's environment, then the framework's,
    then ``extra_env``; ``notes`` come first in the plan's, after the launcher's."""
    namespace = job.metadata.namespace or "default"
    specs = job.replica_specs()
    notes = ([launcher.note] if launcher is not None else []) + list(notes)
    files: dict[Path, str] = {}
    if launcher is not None:
        files[Path(addressing.mpi_hostfile)] = launcher.hostfile
    absent: set[tuple[str, int]] = set()
    skipped = launcher.not_run_here if launcher is not None else frozenset()
    replicas = []
    for pod in pods:
        rtype, index = pod.replica_type, pod.index
        where = f"{job.kind}/{job.name} {rtype}[{index}]"
        if rtype in skipped:
            absent.add((rtype, index))
            continue
        template = specs[rtype].template
        container = main_container(template, framework.run_container(job, rtype) or "")
        if container is None:
            raise LocalRunError(f"{where}: the pod template has no containers")
        if not container.get("command") and rtype in kind.optional_steps:
            absent.add((rtype, index))
            notes.append(
                f"{where}: the {rtype} container has no command (it runs its image "
                f"{container.get('image')!r}), so it is skipped here and counted as Complete"
            )
            continue
        if len(template.get("spec", {}).get("containers") or []) > 1:
            notes.append(f"{where}: only container {container.get('name')!r} runs locally")
        if container.get("workingDir"):
            notes.append(
                f"{where}: workingDir {container['workingDir']} is the image's; locally "
                "the process runs in --workdir"
            )
        # Every pod is this machine: its IP (a PaddleJob's rendezvous reads it) is the host.
        fields = pod_fields(pod.name, namespace, **{"status.podIP": addressing.host, **pod.fields})
        env = manifest_env(kind.prepare(container), where=where, fields=fields)
        injected = framework.container_env(job, rtype, index, container, addressing)
        env.update(manifest_env({"env": injected}, where=where, fields=fields))
        env.update(pod.env)
        env.update(extra_env or {})
        env = {**pod.env_defaults, **env}
        argv = command_of(
            container, env, where=where, entrypoint=list(entrypoint), no_command=kind.no_command
        )
        replicas.append(
            LocalReplica(
                replica_type=rtype,
                index=index,
                container=str(container.get("name", "")),
                argv=argv,
                env=env,
            )
        )
    return LocalPlan(
        job=job,
        framework=framework,
        replicas=replicas,
        files=files,
        notes=notes,
        absent=frozenset(absent),
        success_phase=kind.success_phase,
    )


def _pods_of(job: Job) -> list[LocalPod]:
    """The job's pods, leaders first (a Master before the Workers)."""
    specs = job.replica_specs()
    leaders = framework_for(job.kind).info.replica_types
    order = sorted(specs, key=lambda t: leaders.index(t) if t in leaders else len(leaders))
    return [
        LocalPod(replica_type=rtype, index=index, name=replica_name(job.name, rtype, index))
        for rtype in order
        for index in range(replicas_of(specs[rtype]))
    ]


def plan_local_run(
    job: Job,
    *,
    scratch: Path,
    entrypoint: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    ports: Sequence[int] | None = None,
) -> LocalPlan:
    """The processes that run ``job`` locally (``job`` is defaulted first).

    ``scratch`` is a directory for generated files (the MPI hostfile); ``ports`` are the
    ports to hand out, one per replica (free ports are picked when omitted).
    """
    job = apply_defaults(job)
    framework = framework_for(job.kind)
    pods = _pods_of(job)
    addressing = local_addressing(pods, ports, scratch)
    launcher = None
    if isinstance(job, MPIJob):
        launcher = Launcher(
            not_run_here=frozenset(mpi.sshd_replica_types(job)),
            hostfile=mpi.hostfile(job, addressing),
            note="MPIJob: workers only run sshd for the launcher, so they are not started; "
            f"the launcher's mpirun starts the ranks on this machine from "
            f"{addressing.mpi_hostfile}",
        )
    plan = plan_pods(
        job,
        framework,
        pods,
        addressing=addressing,
        entrypoint=entrypoint,
        extra_env=extra_env,
        launcher=launcher,
    )
    bounds = pytorch.elastic_bounds(job) if isinstance(job, PyTorchJob) else None
    if bounds is None:
        return plan
    assert isinstance(job, PyTorchJob)
    policy = job.spec.elastic_policy
    chosen = dict(addressing.ports)

    def rescale(nodes: int) -> list[LocalReplica]:
        # What the scale subresource changes on a cluster: the Worker replicas; the
        # operator then plans the new pods. Nodes that run keep their ports.
        wire = job.model_dump(mode="json", by_alias=True, exclude_none=True)
        wire["spec"]["pytorchReplicaSpecs"][pytorch.WORKER]["replicas"] = nodes
        scaled = load_job(wire)
        pods = _pods_of(scaled)
        extra = iter(free_ports(len(pods)))
        ports = [chosen.get((p.replica_type, p.index)) or next(extra) for p in pods]
        again = plan_local_run(
            scaled, scratch=scratch, entrypoint=entrypoint, extra_env=extra_env, ports=ports
        )
        return [r for r in again.replicas if r.replica_type == pytorch.WORKER]

    return elastic_plan(
        plan,
        ElasticGroup(
            replica_type=pytorch.WORKER,
            low=bounds[0],
            high=bounds[1],
            nodes=sum(1 for r in plan.replicas if r.replica_type == pytorch.WORKER),
            max_restarts=policy.max_restarts if policy is not None else None,
            rescale=rescale,
        ),
        scratch,
    )


def elastic_plan(plan: LocalPlan, group: ElasticGroup, scratch: Path) -> LocalPlan:
    """``plan`` with its elastic ``group``: node 0 hosts the rendezvous store, checkpoints
    go to ``scratch`` (see :func:`~kubetrain.local.elastic.local_rendezvous`), each node's
    torchrun checked to be able to rendezvous here."""
    for replica in plan.replicas:
        if replica.replica_type == group.replica_type:
            where = f"{plan.job.kind}/{plan.job.name} {replica.label}"
            check_elastic_env(where, replica, group.low, group.high)
    rescale, rtype = group.rescale, group.replica_type
    checkpoints = scratch / "checkpoints"
    group = replace(
        group, rescale=lambda nodes: local_rendezvous(rescale(nodes), rtype, checkpoints)
    )
    replicas = local_rendezvous(plan.replicas, rtype, checkpoints)
    return replace(plan, replicas=replicas, elastic=group)


def job_succeeded(job: Job, exit_codes: Mapping[tuple[str, int], int | None]) -> bool:
    """Whether the finished replicas make the job Succeeded, by the framework's rule (the
    one the operator applies to pods)."""
    detail = framework_for(job.kind).succeeded(
        job, lambda rtype, index: exit_codes.get((rtype, index)) == 0
    )
    return detail is not None
