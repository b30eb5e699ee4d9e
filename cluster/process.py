"""Long-running local processes that run beside the control plane (Kueue, the
scheduler-plugins controller): started in a session of their own, their output appended
to a log file, their identity kept in a pid file so that another process (``make
kueue-down``, a later test session cleaning up) can stop exactly them.

A pid file holds the pid and the process's start time (field 22 of ``/proc/<pid>/stat``),
so a pid the kernel has since given to another process is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


class ProcessError(RuntimeError):
    """A local process could not be started or stopped."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    name_end = raw.rindex(")")
    return [str(pid), raw[raw.index("(") : name_end + 1], *raw[name_end + 2 :].split()]


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[21] if fields else None


def _alive(pid: int, start_time: str | None) -> bool:
    fields = _stat_fields(pid)
    if fields is None or fields[2] in ("Z", "X"):
        return False
    return start_time is None or fields[21] == start_time


class LocalProcess:
    """One named process with a pid file and a log file."""

    def __init__(self, name: str, *, pid_file: Path, log_file: Path) -> None:
        self.name = name
        self.pid_file = pid_file
        self.log_file = log_file
        self._popen: subprocess.Popen[bytes] | None = None

    def _recorded(self) -> tuple[int, str | None] | None:
        try:
            fields = self.pid_file.read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return None
        if not fields or not fields[0].isdigit():
            return None
        return int(fields[0]), (fields[1] if len(fields) > 1 else None)

    @property
    def pid(self) -> int | None:
        """The pid of the running process, or None when it does not run."""
        recorded = self._recorded()
        if recorded is None:
            return None
        if self._popen is not None and self._popen.pid == recorded[0]:
            # Our own child: poll() reaps it once it has exited.
            return recorded[0] if self._popen.poll() is None else None
        return recorded[0] if _alive(*recorded) else None

    def is_running(self) -> bool:
        return self.pid is not None

    @property
    def returncode(self) -> int | None:
        """The exit status, when this object started the process and it has exited."""
        return None if self._popen is None else self._popen.poll()

    def start(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        """Start ``args`` with output appended to the log file; return its pid.

        Raises ``ProcessError`` when the process already runs or cannot be started.
        """
        if self.is_running():
            raise ProcessError(
                f"{self.name} already runs (pid {self.pid}, pid file {self.pid_file}): "
                "stop it first"
            )
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            try:
                self._popen = subprocess.Popen(
                    list(args),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=dict(env) if env is not None else None,
                    cwd=cwd,
                    # A session of its own: a Ctrl-C meant for whoever started it (make,
                    # pytest) does not reach it, and it can outlive its starter.
                    start_new_session=True,
                )
            except OSError as err:
                raise ProcessError(f"could not start {self.name} ({args[0]}): {err}") from err
        pid = self._popen.pid
        self.pid_file.write_text(f"{pid} {_start_time(pid) or ''}\n", encoding="utf-8")
        return pid

    def stop(self, *, timeout: float = 15.0) -> bool:
        """Stop the process (SIGTERM, then SIGKILL after ``timeout`` seconds).

        Returns whether it was running. The pid file is removed either way.
        """
        pid = self.pid
        if pid is not None:
            self._signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.is_running() and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.is_running():
                self._signal(pid, signal.SIGKILL)
                while self.is_running() and time.monotonic() < deadline + 5:
                    time.sleep(0.1)
            if self.is_running():
                raise ProcessError(f"{self.name} (pid {pid}) did not exit after SIGKILL")
        self.pid_file.unlink(missing_ok=True)
        return pid is not None

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the log, for error reports."""
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return f"(no log at {self.log_file})"
        header = f"----- {self.name} ({self.log_file}), last {lines} lines -----"
        return "\n".join([header, *text[-lines:]])


def wait_http_ok(
    process: LocalProcess,
    what: str,
    url: str,
    deadline: float,
    fail: Callable[[str], Exception],
) -> None:
    """Poll ``url`` until it answers 200 while ``process`` (``what``) runs; raise
    ``fail(message)`` when it exits first or ``deadline`` (``time.monotonic``) passes,
    the message naming the last answer."""
    last = "no answer yet"
    while True:
        if not process.is_running():
            raise fail(f"{what} exited (status {process.returncode}) before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as err:
            last = f"HTTP {err.code}: {err.read().decode(errors='replace')[:200]}"
        except OSError as err:
            last = str(err)
        if time.monotonic() > deadline:
            raise fail(f"{what} was not ready at {url} in time: {last}")
        time.sleep(0.2)
