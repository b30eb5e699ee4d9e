"""Local processes beside the control plane: started in their own session with a pid file
and a log, stopped by that pid file only when it still names the process started."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.process import LocalProcess, ProcessError, free_port


@pytest.fixture
def process(tmp_path: Path) -> Iterator[LocalProcess]:
    local = LocalProcess(
        "worker",
        pid_file=tmp_path / "pids" / "worker.pid",
        log_file=tmp_path / "logs" / "worker.log",
    )
    try:
        yield local
    finally:
        local.stop(timeout=2)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _wait_for_log(process: LocalProcess, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in (process.log_file.read_text() if process.log_file.exists() else ""):
        assert time.monotonic() < deadline, f"{text!r} never reached {process.log_file}"
        time.sleep(0.05)


def test_starts_in_its_own_session_logs_and_stops(process: LocalProcess) -> None:
    pid = process.start(_python("import time; print('started', flush=True); time.sleep(60)"))
    assert process.is_running() and process.pid == pid
    assert os.getsid(pid) == pid, "the process should lead a session of its own"
    assert process.pid_file.read_text().split()[0] == str(pid)
    _wait_for_log(process, "started")
    assert process.stop() is True
    assert not process.is_running()
    assert not process.pid_file.exists()
    assert process.stop() is False


def test_another_object_finds_and_stops_it_by_its_pid_file(
    process: LocalProcess, tmp_path: Path
) -> None:
    pid = process.start(_python("import time; time.sleep(60)"))
    elsewhere = LocalProcess("worker", pid_file=process.pid_file, log_file=process.log_file)
    assert elsewhere.pid == pid
    # The process exits as this test's unreaped child (a zombie): that counts as stopped.
    assert elsewhere.stop() is True
    assert not process.is_running()


def test_a_pid_file_naming_another_process_is_not_ours(process: LocalProcess) -> None:
    sleeper = subprocess.Popen(_python("import time; time.sleep(60)"))
    try:
        process.pid_file.parent.mkdir(parents=True, exist_ok=True)
        # Same pid, another start time: the kernel gave the pid to someone else.
        process.pid_file.write_text(f"{sleeper.pid} 1\n")
        assert not process.is_running()
        assert process.stop() is False
        assert sleeper.poll() is None, "stop() must not signal a process it did not start"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_escalates_to_sigkill_when_sigterm_is_ignored(process: LocalProcess) -> None:
    process.start(
        _python(
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ignoring', flush=True); time.sleep(60)"
        )
    )
    _wait_for_log(process, "ignoring")
    started = time.monotonic()
    assert process.stop(timeout=1) is True
    assert time.monotonic() - started >= 1
    assert process.returncode == -9


def test_rejects_starting_twice(process: LocalProcess) -> None:
    pid = process.start(_python("import time; time.sleep(60)"))
    with pytest.raises(ProcessError, match=rf"worker already runs \(pid {pid}"):
        process.start(_python("pass"))


def test_reports_a_command_that_cannot_start(process: LocalProcess, tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match=r"could not start worker"):
        process.start([str(tmp_path / "no-such-binary")])


def test_log_tail_names_the_log(process: LocalProcess) -> None:
    process.start(_python("print('\\n'.join(str(i) for i in range(100)), flush=True)"))
    _wait_for_log(process, "99")
    tail = process.log_tail(3).splitlines()
    assert tail[0] == f"----- worker ({process.log_file}), last 3 lines -----"
    assert tail[1:] == ["97", "98", "99"]


def test_free_port_is_free_on_loopback() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", port))
