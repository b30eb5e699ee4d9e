"""``kubetrain run --local JOB.yaml``: run a job manifest on this machine as real processes.

Each replica's main container becomes one process, started with the container's
``command`` + ``args`` and the environment the operator would inject, computed by the
same plugin functions the operator uses (:mod:`kubetrain.controller.plugins`) with
:class:`~kubetrain.controller.plugins.LocalAddressing`: every replica is on
``127.0.0.1`` with a free port of its own. For an MPIJob only the launcher runs: the
hostfile is generated as the operator generates it, with this machine's slots, so the
launcher's real ``mpirun`` starts the ranks locally instead of over SSH to workers.

Each replica's output is streamed with a ``[<type>-<index>]`` prefix. The job's status
follows the operator's rules (the Master, Chief or Launcher decides; otherwise the
Workers), the remaining processes are stopped once it is decided (after a few seconds
to finish by themselves when it succeeded), and the exit code is
0 when the job succeeded, the failed replica's exit code when it failed, 124 when it
ran past its deadline and 130 when interrupted. Ctrl-C stops every process it started.
Locally nothing is restarted: a failed replica fails the job.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from kubetrain.api import (
    JobValidationError,
    MPIJob,
    PyTorchJob,
    TFJob,
    apply_defaults,
    load_job_file,
)
from kubetrain.api.loader import Job
from kubetrain.controller.plugins import LocalAddressing, mpi, pytorch, tensorflow
from kubetrain.controller.plugins.addressing import EnvVar
from kubetrain.controller.plugins.common import main_container, replicas_of

#: Exit codes for outcomes that are not a replica's own exit code.
EXIT_FAILED = 1
#: A manifest that cannot be read or is not a valid job (as ``kubetrain validate`` says).
EXIT_INVALID_MANIFEST = 1
EXIT_USAGE = 2
EXIT_DEADLINE = 124
EXIT_INTERRUPTED = 130
#: Seconds replicas get to exit after SIGTERM before they are killed.
GRACE_SECONDS = 10.0
#: Seconds the other replicas get to finish by themselves once the job has succeeded.
SETTLE_SECONDS = 5.0

_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class LocalRunError(Exception):
    """The manifest cannot be run locally; the message says why and what to change."""


@dataclass(frozen=True, kw_only=True)
class LocalReplica:
    """One process to start: a replica's main container."""

    replica_type: str
    index: int
    container: str
    argv: list[str]
    env: dict[str, str]
    """Variables set for this replica: the manifest's, then the injected ones."""

    @property
    def label(self) -> str:
        """``<type>-<index>``, as in the replica's pod name."""
        return f"{self.replica_type.lower()}-{self.index}"


@dataclass(frozen=True, kw_only=True)
class LocalPlan:
    """Everything needed to run a job locally."""

    job: Job
    replicas: list[LocalReplica]
    files: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How a local run ended."""

    phase: str
    """``Succeeded``, ``Failed`` or ``Interrupted``."""
    reason: str
    exit_code: int
    exit_codes: dict[str, int | None]
    seconds: float


# --- planning ---------------------------------------------------------------------------


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


def _manifest_env(
    container: dict[str, Any], *, where: str, pod_name: str, namespace: str
) -> dict[str, str]:
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
        field_path = (item["valueFrom"].get("fieldRef") or {}).get("fieldPath")
        if field_path == "metadata.name":
            env[name] = pod_name
        elif field_path == "metadata.namespace":
            env[name] = namespace
        else:
            raise LocalRunError(
                f"{where}: env {name} uses valueFrom {item['valueFrom']!r}, which run --local "
                "cannot resolve (only fieldRef metadata.name and metadata.namespace); "
                "set it with --env NAME=VALUE"
            )
    return env


def _command(
    container: dict[str, Any], env: Mapping[str, str], *, where: str, entrypoint: list[str]
) -> list[str]:
    command = [str(part) for part in container.get("command") or []]
    args = [str(part) for part in container.get("args") or []]
    if not command:
        if not entrypoint:
            raise LocalRunError(
                f"{where}: the container has no command, so it runs its image's "
                "entrypoint, which run --local cannot know; add a command to the manifest "
                "or pass --entrypoint 'python -m images.tensorflow.train'"
            )
        command = list(entrypoint)
    return [expand_references(part, env) for part in command + args]


def _replica_container(
    job: Job, replica_type: str, template: dict[str, Any], where: str
) -> dict[str, Any]:
    if isinstance(job, PyTorchJob):
        name = pytorch.CONTAINER
    elif isinstance(job, TFJob):
        name = tensorflow.CONTAINER
    else:
        name = ""  # the MPI operator modifies containers[0]
    container = main_container(template, name)
    if container is None:
        raise LocalRunError(f"{where}: the pod template has no containers")
    return container


def _injected(
    job: Job,
    replica_type: str,
    index: int,
    addressing: LocalAddressing,
    container: dict[str, Any],
    hostfile: Path | None,
) -> list[EnvVar]:
    if isinstance(job, PyTorchJob):
        return pytorch.replica_env(job, replica_type, index, addressing)
    if isinstance(job, TFJob):
        if container.get("name") != tensorflow.CONTAINER:
            return []  # upstream injects TF_CONFIG only into the `tensorflow` container
        return tensorflow.replica_env(job, replica_type, index, addressing)
    if replica_type == mpi.LAUNCHER and hostfile is not None:
        return mpi.launcher_env(job, str(hostfile))
    return mpi.replica_env(job, replica_type, index, addressing)


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
    namespace = job.metadata.namespace or "default"
    specs = job.replica_specs()
    order = sorted(specs, key=_replica_order)
    slots = [(rtype, index) for rtype in order for index in range(replicas_of(specs[rtype]))]
    chosen = list(ports) if ports is not None else free_ports(len(slots))
    if len(chosen) < len(slots):
        raise LocalRunError(f"{len(slots)} ports are needed, {len(chosen)} were given")
    addressing = LocalAddressing(ports=dict(zip(slots, chosen, strict=False)))

    notes: list[str] = []
    files: dict[Path, str] = {}
    hostfile: Path | None = None
    if isinstance(job, MPIJob):
        hostfile = scratch / "hostfile"
        files[hostfile] = mpi.hostfile(job, addressing)
        notes.append(
            "MPIJob: workers only run sshd for the launcher, so they are not started; the "
            f"launcher's mpirun starts the ranks on this machine from {hostfile}"
        )

    replicas = []
    for rtype, index in slots:
        if isinstance(job, MPIJob) and rtype == mpi.WORKER:
            continue
        where = f"{job.kind}/{job.name} {rtype}[{index}]"
        template = specs[rtype].template
        container = _replica_container(job, rtype, template, where)
        if len(template.get("spec", {}).get("containers") or []) > 1:
            notes.append(f"{where}: only container {container.get('name')!r} runs locally")
        if container.get("workingDir"):
            notes.append(
                f"{where}: workingDir {container['workingDir']} is the image's; locally "
                "the process runs in --workdir"
            )
        pod_name = f"{job.name}-{rtype.lower()}-{index}"
        env = _manifest_env(container, where=where, pod_name=pod_name, namespace=namespace)
        for var in _injected(job, rtype, index, addressing, container, hostfile):
            env[var["name"]] = var["value"]
        env.update(extra_env or {})
        argv = _command(container, env, where=where, entrypoint=list(entrypoint))
        replicas.append(
            LocalReplica(
                replica_type=rtype,
                index=index,
                container=str(container.get("name", "")),
                argv=argv,
                env=env,
            )
        )
    return LocalPlan(job=job, replicas=replicas, files=files, notes=notes)


def _replica_order(replica_type: str) -> int:
    leaders = ("Master", "Chief", "Launcher", "PS", "Worker", "Evaluator")
    return leaders.index(replica_type) if replica_type in leaders else len(leaders)


# --- status -------------------------------------------------------------------------------


def job_succeeded(job: Job, exit_codes: Mapping[tuple[str, int], int | None]) -> bool:
    """Whether the finished replicas make the job Succeeded, by the operator's rules.

    PyTorchJob: the Master succeeded, or without one every Worker (any Worker when
    elastic). TFJob: the Chief/Master succeeded, or without one Worker 0 (every Worker
    with successPolicy AllWorkers). MPIJob: the Launcher succeeded.
    """

    def ok(rtype: str, index: int) -> bool:
        return exit_codes.get((rtype, index)) == 0

    specs = job.replica_specs()
    workers = [i for (rtype, i) in exit_codes if rtype == "Worker"]
    if isinstance(job, MPIJob):
        return ok(mpi.LAUNCHER, 0)
    if isinstance(job, PyTorchJob):
        if pytorch.MASTER in specs:
            return ok(pytorch.MASTER, 0)
        if job.spec.elastic_policy is not None:
            return any(ok("Worker", i) for i in workers)
        return bool(workers) and all(ok("Worker", i) for i in workers)
    for leader in ("Chief", "Master"):
        if leader in specs:
            return ok(leader, 0)
    if job.spec.success_policy == "AllWorkers":
        return bool(workers) and all(ok("Worker", i) for i in workers)
    return ok("Worker", 0)


# --- running ------------------------------------------------------------------------------


class _Replica:
    def __init__(
        self,
        spec: LocalReplica,
        process: subprocess.Popen[bytes],
        out: TextIO,
        lock: threading.Lock,
    ) -> None:
        self.spec = spec
        self.process = process
        self.exit_code: int | None = None
        self._reader = threading.Thread(
            target=self._stream, args=(out, lock), name=f"log-{spec.label}", daemon=True
        )
        self._reader.start()

    def _stream(self, out: TextIO, lock: threading.Lock) -> None:
        assert self.process.stdout is not None
        prefix = f"[{self.spec.label}] "
        for raw in iter(self.process.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with lock:
                out.write(prefix + line + "\n")
                out.flush()

    def poll(self) -> int | None:
        if self.exit_code is None:
            code = self.process.poll()
            if code is not None:
                self.exit_code = code
        return self.exit_code

    def signal(self, signum: int) -> None:
        """Signal the replica's whole process group (its own children included)."""
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def finish_logs(self, timeout: float) -> None:
        self._reader.join(timeout)


def _exit_code_of(code: int) -> int:
    """A process's status as a shell reports it: 128 + signal for a killed process."""
    return 128 - code if code < 0 else code


def _stop(replicas: Sequence[_Replica], grace: float) -> None:
    """SIGTERM what still runs, SIGKILL it after ``grace`` seconds, then sweep every
    replica's process group so no child (an mpirun rank, a torchrun worker) outlives it."""
    live = [r for r in replicas if r.poll() is None]
    for replica in live:
        replica.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(r.poll() is None for r in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    for replica in replicas:
        replica.signal(signal.SIGKILL)
        replica.process.wait()
        replica.poll()


@contextmanager
def _interrupt_flag() -> Iterator[threading.Event]:
    """An event set by SIGINT/SIGTERM while the block runs (main thread only)."""
    event = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        event.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield event
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def execute(
    plan: LocalPlan,
    *,
    workdir: Path,
    out: TextIO,
    deadline_seconds: float | None = None,
    grace_seconds: float = GRACE_SECONDS,
    settle_seconds: float = SETTLE_SECONDS,
) -> Outcome:
    """Start every replica of ``plan``, stream their logs to ``out`` and decide the job.

    Once the job has succeeded, replicas still running get ``settle_seconds`` to exit by
    themselves; then (and at once when it failed) they get SIGTERM and, after
    ``grace_seconds``, SIGKILL.
    """
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    base_env = dict(os.environ)
    # `python`, `torchrun`, `horovodrun` resolve to the environment kubetrain runs in.
    tools = str(Path(sys.executable).parent)
    base_env["PATH"] = tools + os.pathsep + base_env.get("PATH", "")

    lock = threading.Lock()
    started = time.monotonic()
    replicas: list[_Replica] = []
    job = plan.job
    with _interrupt_flag() as interrupted:
        try:
            for spec in plan.replicas:
                with lock:
                    out.write(f"kubetrain: starting {spec.label}: {shlex.join(spec.argv)}\n")
                    out.flush()
                try:
                    process = subprocess.Popen(
                        spec.argv,
                        cwd=workdir,
                        env={**base_env, **spec.env},
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                except OSError as error:
                    raise LocalRunError(
                        f"{spec.label}: cannot start {spec.argv[0]!r}: {error.strerror}"
                    ) from None
                replicas.append(_Replica(spec, process, out, lock))

            phase, reason, code = "", "", 0
            while not phase:
                exit_codes = {(r.spec.replica_type, r.spec.index): r.poll() for r in replicas}
                failed = [r for r in replicas if r.exit_code not in (None, 0)]
                if job_succeeded(job, exit_codes):
                    phase, reason = "Succeeded", "the job's success condition was met"
                elif failed:
                    first = failed[0]
                    assert first.exit_code is not None
                    code = _exit_code_of(first.exit_code)
                    phase, reason = "Failed", f"{first.spec.label} exited with code {code}"
                elif all(r.exit_code is not None for r in replicas):
                    phase, code = "Failed", EXIT_FAILED
                    reason = "every replica exited but the job's success condition was not met"
                elif interrupted.is_set():
                    phase, reason, code = "Interrupted", "interrupted", EXIT_INTERRUPTED
                elif deadline_seconds is not None and time.monotonic() - started > deadline_seconds:
                    phase, code = "Failed", EXIT_DEADLINE
                    reason = f"DeadlineExceeded: still running after {deadline_seconds:g}s"
                else:
                    time.sleep(0.05)
            if phase == "Succeeded":
                # The rest are usually finishing too (a DDP worker after its master):
                # let them, so their last lines are not lost, before stopping the others
                # (a parameter server never exits by itself).
                settle = time.monotonic() + settle_seconds
                while (
                    any(r.poll() is None for r in replicas)
                    and time.monotonic() < settle
                    and not interrupted.is_set()
                ):
                    time.sleep(0.05)
        finally:
            _stop(replicas, grace_seconds)
            for replica in replicas:
                replica.finish_logs(timeout=5)
    return Outcome(
        phase=phase,
        reason=reason,
        exit_code=code,
        exit_codes={
            r.spec.label: None if r.exit_code is None else _exit_code_of(r.exit_code)
            for r in replicas
        },
        seconds=time.monotonic() - started,
    )


# --- command line -------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``kubetrain run``."""
    parser.add_argument("manifest", metavar="JOB.yaml", help="a PyTorchJob, TFJob or MPIJob")
    parser.add_argument(
        "--local",
        action="store_true",
        help="run on this machine as real processes (the only mode so far; required)",
    )
    parser.add_argument(
        "--workdir",
        default=".",
        help="directory the replicas run in (default: the current directory)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable in every replica (repeatable), after the injected ones",
    )
    parser.add_argument(
        "--entrypoint",
        default="",
        help="command for containers that have none (they would run the image's entrypoint)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="fail the job after this many seconds (default: runPolicy.activeDeadlineSeconds)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print each replica's command and injected environment, start nothing",
    )


def _parse_env(pairs: Sequence[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise LocalRunError(f"--env {pair!r} must be NAME=VALUE")
        env[name] = value
    return env


def _print_plan(plan: LocalPlan, out: TextIO) -> None:
    for path, text in plan.files.items():
        out.write(f"# {path}\n{text}")
    for replica in plan.replicas:
        out.write(f"{replica.label} ({replica.container}): {shlex.join(replica.argv)}\n")
        for name, value in replica.env.items():
            out.write(f"  {name}={value}\n")


def run(args: argparse.Namespace) -> int:
    """Run ``kubetrain run``; return its exit code."""
    out = sys.stdout
    if not args.local:
        print(
            "kubetrain run: only --local is supported: it runs the job here as processes; "
            "submit to a cluster with kubectl apply -f",
            file=sys.stderr,
        )
        return EXIT_USAGE
    workdir = Path(args.workdir)
    if not workdir.is_dir():
        print(f"kubetrain run: --workdir {args.workdir} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        # Any file ends here or below, never in a traceback (see kubetrain.api.loader).
        job = load_job_file(args.manifest)
    except JobValidationError as error:
        print(error, file=sys.stderr)
        return EXIT_INVALID_MANIFEST
    except OSError as error:
        print(f"kubetrain run: cannot read {args.manifest}: {error.strerror}", file=sys.stderr)
        return EXIT_INVALID_MANIFEST

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kubetrain-run-")))
        try:
            plan = plan_local_run(
                job,
                scratch=scratch,
                entrypoint=shlex.split(args.entrypoint),
                extra_env=_parse_env(args.env),
            )
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_USAGE
        for note in plan.notes:
            out.write(f"kubetrain: note: {note}\n")
        if args.dry_run:
            _print_plan(plan, out)
            return 0
        run_policy = plan.job.spec.run_policy
        deadline = args.timeout
        if deadline is None and run_policy is not None:
            deadline = run_policy.active_deadline_seconds
        try:
            outcome = execute(plan, workdir=workdir, out=out, deadline_seconds=deadline)
        except LocalRunError as error:
            print(f"kubetrain run: {error}", file=sys.stderr)
            return EXIT_FAILED
    replicas = ", ".join(
        f"{label} {'running' if code is None else f'exit {code}'}"
        for label, code in outcome.exit_codes.items()
    )
    out.write(
        f"kubetrain: {plan.job.kind}/{plan.job.name} {outcome.phase} after "
        f"{outcome.seconds:.1f}s: {outcome.reason} ({replicas})\n"
    )
    out.flush()
    return outcome.exit_code
