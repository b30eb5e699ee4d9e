"""Running a planned job: one process per replica, each in its own process group, their
output streamed with a ``[<type>-<index>]`` prefix (and, with ``log_dir``, written to
``<log_dir>/<type>-<index>.log``). Replicas start in the framework's order: one that
waits for others to be Ready starts once they run, one that waits for them to be
Complete (a TrainJob's trainer after its initializers) once they exited with 0. The job's
status follows the operator's rules (its framework's success rule); the remaining
processes are stopped once it is decided (after a few seconds to finish by themselves
when it succeeded). Ctrl-C stops every process started. A replica that exits by itself
with a failure fails the job; one killed by a signal from outside (what a lost node is on
this machine), or stopped by SIGTERM (exit 143: what a drained pod does, the sample
trainers after checkpointing the step they finished), restarts the whole gang, as the
operator does after an infrastructure failure: every replica is stopped and started again
with ``KUBETRAIN_RESTART_ATTEMPT`` and ``KUBETRAIN_RESTART_REASON`` (the signal's name)
in its environment, up to
``infrastructure_restarts`` times (a sample trainer with a checkpoint directory resumes
from its last checkpoint).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, TextIO

from kubetrain.api import env_names as E
from kubetrain.api.progress import REPORTING_KINDS
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks import StartAfter
from kubetrain.local.elastic import Rescale, ScaleAt, Scaler, describe, lose_node
from kubetrain.local.plan import LocalPlan, LocalReplica, LocalRunError
from kubetrain.local.progress import local_progress

#: Exit codes for outcomes that are not a replica's own exit code.
EXIT_FAILED = 1
EXIT_DEADLINE = 124
EXIT_INTERRUPTED = 130
#: Seconds replicas get to exit after SIGTERM before they are killed.
GRACE_SECONDS = 10.0
#: Seconds the other replicas get to finish by themselves once the job has succeeded.
SETTLE_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How a local run ended."""

    phase: str
    """``Succeeded`` (a TrainJob: ``Complete``), ``Failed`` or ``Interrupted``."""
    reason: str
    exit_code: int
    exit_codes: dict[str, int | None]
    """By replica label; None for one still running when stopped, or never started."""
    seconds: float
    failed: str | None = None
    """The label of the replica whose exit failed the job, if one did."""
    logs: dict[str, Path] = field(default_factory=dict)
    """Each started replica's log file, by label (with ``log_dir``)."""
    not_started: tuple[str, ...] = ()
    """Replicas still waiting for their turn when the job ended (e.g. after a failed
    initializer)."""
    progress: dict[str, Any] | None = None
    """A TrainJob's last progress report (``status.trainerStatus``), if it sent one."""
    rescales: list[Rescale] = field(default_factory=list)
    """An elastic job's scale decisions, in order, with how long each took to re-form."""
    removed: tuple[str, ...] = ()
    """Nodes a scale plan removed (their exit does not fail the job)."""


class _Replica:
    def __init__(
        self,
        spec: LocalReplica,
        process: subprocess.Popen[bytes],
        out: TextIO,
        lock: threading.Lock,
        log: IO[str] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self._on_line = on_line
        self.process = process
        self.exit_code: int | None = None
        self._log = log
        self._reader = threading.Thread(
            target=self._stream, args=(out, lock), name=f"log-{spec.label}", daemon=True
        )
        self._reader.start()

    def _stream(self, out: TextIO, lock: threading.Lock) -> None:
        assert self.process.stdout is not None
        prefix = f"[{self.spec.label}] "
        try:
            for raw in iter(self.process.stdout.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                if self._log is not None:
                    self._log.write(line + "\n")
                    self._log.flush()
                with lock:
                    out.write(prefix + line + "\n")
                    out.flush()
                if self._on_line is not None:
                    self._on_line(line)
        finally:
            if self._log is not None:
                self._log.close()

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


def _stop_signal(replica: _Replica) -> signal.Signals | None:
    """The signal that ended ``replica`` from outside: one that killed it, or SIGTERM that
    it obeyed by exiting 143 (the stop a pod gets when it is drained or evicted)."""
    code = replica.exit_code or 0
    if code < 0:
        return signal.Signals(-code)
    return signal.SIGTERM if code == 128 + signal.SIGTERM else None


def _killed(failed: Sequence[_Replica]) -> tuple[_Replica, signal.Signals] | None:
    """The first of ``failed`` a signal ended, and the signal (its peers may have failed
    because of it)."""
    return next(((r, s) for r in failed if (s := _stop_signal(r)) is not None), None)


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


def _waits_for(
    spec: LocalReplica,
    orders: Sequence[StartAfter],
    plan: LocalPlan,
    started: dict[tuple[str, int], _Replica],
) -> StartAfter | None:
    """The first start-order rule that still holds ``spec`` back (None: it may start).
    Locally a running process counts as Ready."""
    for order in orders:
        if spec.replica_type not in order.waiting:
            continue
        for needed in order.needed:
            if needed in plan.absent:
                continue
            replica = started.get(needed)
            if replica is None or (order.until == "Complete" and replica.poll() != 0):
                return order
    return None


def _start(
    spec: LocalReplica,
    *,
    workdir: Path,
    env: dict[str, str],
    log_dir: Path | None,
    injected: Mapping[str, str],
) -> tuple[subprocess.Popen[bytes], IO[str] | None, Path | None]:
    log_path = log_dir / f"{spec.label}.log" if log_dir is not None else None
    try:
        process = subprocess.Popen(
            spec.argv,
            cwd=workdir,
            env={**env, **spec.env, **injected},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as error:
        raise LocalRunError(
            f"{spec.label}: cannot start {spec.argv[0]!r}: {error.strerror}"
        ) from None
    log = log_path.open("w", encoding="utf-8") if log_path is not None else None
    return process, log, log_path


def execute(
    plan: LocalPlan,
    *,
    workdir: Path,
    out: TextIO,
    deadline_seconds: float | None = None,
    grace_seconds: float = GRACE_SECONDS,
    settle_seconds: float = SETTLE_SECONDS,
    log_dir: Path | None = None,
    scale: Sequence[ScaleAt] = (),
    infrastructure_restarts: int = 0,
) -> Outcome:
    """Start every replica of ``plan`` in its start order, stream their logs to ``out``
    (and to ``log_dir``, when given) and decide the job.

    Once the job has succeeded, replicas still running get ``settle_seconds`` to exit by
    themselves; then (and at once when it failed) they get SIGTERM and, after
    ``grace_seconds``, SIGKILL. ``scale`` is an elastic job's scale plan
    (:mod:`kubetrain.local.elastic`; checked beforehand with ``check_scale_plan``).
    ``infrastructure_restarts``: how many times a replica killed by a signal restarts the
    gang (not an elastic job's: its nodes re-form by themselves).
    """
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    base_env = dict(os.environ)
    # `python`, `torchrun`, `horovodrun` resolve to the environment kubetrain runs in.
    tools = str(Path(sys.executable).parent)
    base_env["PATH"] = tools + os.pathsep + base_env.get("PATH", "")
    # A rank's stdout and stderr share its log: unbuffered, its lines land in the order it
    # wrote them (block-buffered stdout came after stderr's last words), as in the images.
    base_env.setdefault(E.PYTHONUNBUFFERED, "1")

    lock = threading.Lock()
    started = time.monotonic()
    attempt = 0
    replicas: dict[tuple[str, int], _Replica] = {}
    logs: dict[str, Path] = {}
    pending = list(plan.replicas)
    orders = plan.framework.start_order(plan.job)
    announced: set[str] = set()

    def say(message: str) -> None:
        with lock:
            out.write(f"kubetrain: {message}\n")
            out.flush()

    scaler: Scaler | None = None
    removed: set[tuple[str, int]] = set()
    gone: list[_Replica] = []
    if scale and plan.elastic is not None:
        nproc = plan.replicas[0].env.get(E.PET_NPROC_PER_NODE, "") if plan.replicas else ""
        scaler = Scaler(plan.elastic, scale, nproc, started)

    def on_line(line: str) -> None:
        assert scaler is not None
        reformed = scaler.observe(line, time.monotonic())
        if reformed is not None:
            say(describe(reformed))

    def rescale(entry: ScaleAt, before: int) -> None:
        """Start the nodes a scale-up adds; lose those a scale-down removes (highest first,
        as a smaller replica count removes the highest indexes)."""
        assert plan.elastic is not None
        rtype = plan.elastic.replica_type
        say(f"elastic: scaling {before} -> {entry.nodes} nodes ({entry})")
        if entry.nodes > before:
            for spec in plan.elastic.rescale(entry.nodes)[before:]:
                key = (spec.replica_type, spec.index)
                if key in replicas:  # removed earlier, now back: a new process
                    gone.append(replicas.pop(key))
                removed.discard(key)
                pending.append(spec)
            return
        for index in range(before - 1, entry.nodes - 1, -1):
            key = (rtype, index)
            removed.add(key)
            pending[:] = [s for s in pending if (s.replica_type, s.index) != key]
            if key in replicas:
                say(f"elastic: {replicas[key].spec.label} leaves: its torchrun is killed")
                lose_node(replicas[key].process.pid)

    # A TrainJob's trainer, and every replica of a v1 job, reports progress as it would to
    # the operator (local/progress.py).
    namespace = plan.job.metadata.namespace or "default"
    trainers: tuple[str, ...] = tuple(plan.job.replica_specs())
    if isinstance(plan.job, ResolvedTrainJob):
        trainers = (plan.job.spec.trainer_job,)
    progress_run = local_progress(namespace, plan.job.name, say, REPORTING_KINDS[plan.job.kind])
    with _interrupt_flag() as interrupted, progress_run as progress:
        try:
            phase, reason, code, failed_label = "", "", 0, None
            while not phase:
                if scaler is not None:
                    before = scaler.nodes
                    entry = scaler.due(time.monotonic())
                    if entry is not None:
                        rescale(entry, before)
                for spec in list(pending):
                    holding = _waits_for(spec, orders, plan, replicas)
                    if holding is not None:
                        if spec.label not in announced:
                            announced.add(spec.label)
                            say(
                                f"{spec.label} waits for {holding.needed_label} to be "
                                f"{'Complete' if holding.until == 'Complete' else 'running'}"
                            )
                        continue
                    process, log, log_path = _start(
                        spec,
                        workdir=workdir,
                        env=base_env,
                        log_dir=log_dir,
                        injected=progress.env if spec.replica_type in trainers else {},
                    )
                    say(f"starting {spec.label}: {shlex.join(spec.argv)}")
                    if log_path is not None:
                        logs[spec.label] = log_path
                    replicas[(spec.replica_type, spec.index)] = _Replica(
                        spec, process, out, lock, log, on_line if scaler is not None else None
                    )
                    pending.remove(spec)
                running = [r for key, r in replicas.items() if key not in removed]
                exit_codes = {key: r.poll() for key, r in replicas.items() if key not in removed}
                failed = [r for r in running if r.exit_code not in (None, 0)]
                success = plan.succeeded(exit_codes)
                if success is not None:
                    phase, reason = plan.success_phase, success
                elif (
                    failed
                    and (killed := _killed(failed))
                    and scaler is None
                    and (attempt < infrastructure_restarts)
                ):
                    attempt += 1
                    replica, cause = killed[0], killed[1].name
                    how = "stopped" if (replica.exit_code or 0) > 0 else "killed"
                    say(
                        f"{replica.spec.label} was {how} ({cause}), an infrastructure failure: "
                        f"every replica is stopped and the gang starts again as attempt "
                        f"{attempt}; infrastructure restarts used: {attempt} of "
                        f"{infrastructure_restarts}"
                    )
                    _stop(list(replicas.values()), grace_seconds)
                    gone.extend(replicas.values())
                    replicas.clear()
                    pending[:] = list(plan.replicas)
                    announced.clear()
                    base_env.update({E.RESTART_ATTEMPT: str(attempt), E.RESTART_REASON: cause})
                elif failed:
                    first = failed[0]
                    assert first.exit_code is not None
                    code = _exit_code_of(first.exit_code)
                    failed_label = first.spec.label
                    phase, reason = "Failed", f"{first.spec.label} exited with code {code}"
                elif all(r.exit_code is not None for r in running):
                    if any(_waits_for(s, orders, plan, replicas) is None for s in pending):
                        continue  # what they waited for just completed: start them
                    phase, code = "Failed", EXIT_FAILED
                    reason = (
                        "every replica exited but the job's success condition was not met"
                        if not pending
                        else f"{', '.join(s.label for s in pending)} can never start: "
                        "what they wait for exited"
                    )
                elif interrupted.is_set():
                    phase, reason, code = "Interrupted", "interrupted", EXIT_INTERRUPTED
                elif deadline_seconds is not None and time.monotonic() - started > deadline_seconds:
                    phase, code = "Failed", EXIT_DEADLINE
                    reason = f"DeadlineExceeded: still running after {deadline_seconds:g}s"
                else:
                    time.sleep(0.05)
            if phase == plan.success_phase:
                # The rest are usually finishing too (a DDP worker after its master):
                # let them, so their last lines are not lost, before stopping the others
                # (a parameter server never exits by itself).
                settle = time.monotonic() + settle_seconds
                while (
                    any(r.poll() is None for r in replicas.values())
                    and time.monotonic() < settle
                    and not interrupted.is_set()
                ):
                    time.sleep(0.05)
        finally:
            _stop([*replicas.values(), *gone], grace_seconds)
            for replica in [*replicas.values(), *gone]:
                replica.finish_logs(timeout=5)
    codes: dict[str, int | None] = {spec.label: None for spec in plan.replicas}
    for replica in replicas.values():
        codes[replica.spec.label] = (
            None if replica.exit_code is None else _exit_code_of(replica.exit_code)
        )
    return Outcome(
        phase=phase,
        reason=reason,
        exit_code=code,
        exit_codes=codes,
        seconds=time.monotonic() - started,
        failed=failed_label,
        logs=logs,
        not_started=tuple(spec.label for spec in pending),
        progress=progress.last,
        rescales=list(scaler.rescales) if scaler is not None else [],
        removed=tuple(replicas[key].spec.label for key in sorted(removed) if key in replicas),
    )
