"""Running a planned job: one process per replica, each in its own process group, their
output streamed with a ``[<type>-<index>]`` prefix. The job's status follows the
operator's rules (its framework's success rule); the remaining processes are stopped once
it is decided (after a few seconds to finish by themselves when it succeeded). Ctrl-C
stops every process started. Locally nothing is restarted: a failed replica fails the job.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO

from kubetrain.local.plan import LocalPlan, LocalReplica, LocalRunError, job_succeeded

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
    """``Succeeded``, ``Failed`` or ``Interrupted``."""
    reason: str
    exit_code: int
    exit_codes: dict[str, int | None]
    seconds: float


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
