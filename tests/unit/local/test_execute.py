"""Running a planned job (``kubetrain.local.execute``) with real processes: start order,
the framework's success rule, failure, deadline, signals, logs, and nothing left behind.
Each replica is a small Python program, so a test takes about a second."""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from kubetrain.api.loader import load_job
from kubetrain.local.execute import EXIT_DEADLINE, execute
from kubetrain.local.plan import LocalPlan, plan_local_run


def _pytorchjob(master: str | None, worker: str | None, workers: int = 1) -> dict[str, Any]:
    """A PyTorchJob whose master and workers run the Python programs given (None: the
    replica type is left out)."""

    def spec(program: str, replicas: int) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "x", "command": [sys.executable, "-c", program]}
        return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}

    replica_specs = {}
    if master is not None:
        replica_specs["Master"] = spec(master, 1)
    if worker is not None:
        replica_specs["Worker"] = spec(worker, workers)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"pytorchReplicaSpecs": replica_specs},
    }


def _plan(tmp_path: Path, manifest: dict[str, Any]) -> LocalPlan:
    return plan_local_run(load_job(manifest), scratch=tmp_path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_job_succeeds_by_its_frameworks_rule_with_every_line_prefixed_and_logged(
    tmp_path: Path,
) -> None:
    plan = _plan(
        tmp_path,
        _pytorchjob(
            master="import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])",
            worker="import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])",
        ),
    )
    out = io.StringIO()
    outcome = execute(plan, workdir=tmp_path, out=out, log_dir=tmp_path / "logs")
    text = out.getvalue()
    assert outcome.phase == "Succeeded", text
    assert outcome.reason == "job-master-0 completed"
    assert outcome.exit_code == 0
    assert outcome.exit_codes == {"master-0": 0, "worker-0": 0}
    assert outcome.failed is None and outcome.not_started == ()
    assert "[master-0] rank 0 of 2\n" in text
    assert "[worker-0] rank 1 of 2\n" in text
    # The workers start after the master (the operator's start order).
    assert text.index("starting master-0") < text.index("starting worker-0")
    assert outcome.logs == {
        "master-0": tmp_path / "logs" / "master-0.log",
        "worker-0": tmp_path / "logs" / "worker-0.log",
    }
    assert outcome.logs["worker-0"].read_text() == "rank 1 of 2\n"


def test_a_failed_replica_fails_the_job_and_the_others_are_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "master.pid"
    plan = _plan(
        tmp_path,
        _pytorchjob(
            master=f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "time.sleep(300)",
            worker="import sys, time; time.sleep(0.5); sys.exit(3)",
        ),
    )
    out = io.StringIO()
    started = time.monotonic()
    outcome = execute(plan, workdir=tmp_path, out=out, grace_seconds=2)
    assert time.monotonic() - started < 60, "the sleeping master was not stopped"
    assert outcome.phase == "Failed", out.getvalue()
    assert outcome.reason == "worker-0 exited with code 3"
    assert (outcome.exit_code, outcome.failed) == (3, "worker-0")
    # The master got SIGTERM: a shell reports 128 + 15.
    assert outcome.exit_codes == {"master-0": 128 + signal.SIGTERM, "worker-0": 3}
    assert not _alive(int(pid_file.read_text()))


def test_a_replica_killed_by_a_signal_reports_128_plus_its_number(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        _pytorchjob(master="import os, signal; os.kill(os.getpid(), signal.SIGKILL)", worker=None),
    )
    outcome = execute(plan, workdir=tmp_path, out=io.StringIO())
    assert outcome.phase == "Failed"
    assert outcome.exit_code == 128 + signal.SIGKILL
    assert outcome.reason == f"master-0 exited with code {128 + signal.SIGKILL}"


def test_a_deadline_fails_a_job_still_running(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _pytorchjob(master="import time; time.sleep(300)", worker=None))
    outcome = execute(
        plan, workdir=tmp_path, out=io.StringIO(), deadline_seconds=1, grace_seconds=1
    )
    assert outcome.phase == "Failed"
    assert outcome.exit_code == EXIT_DEADLINE
    assert outcome.reason == "DeadlineExceeded: still running after 1s"
    assert 1 <= outcome.seconds < 30


def test_every_worker_exiting_is_success_without_a_master(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _pytorchjob(master=None, worker="print('done')", workers=3))
    outcome = execute(plan, workdir=tmp_path, out=io.StringIO())
    assert (outcome.phase, outcome.reason) == ("Succeeded", "all 3 workers completed")
    assert outcome.exit_codes == {"worker-0": 0, "worker-1": 0, "worker-2": 0}


def test_a_replicas_own_children_do_not_outlive_the_run(tmp_path: Path) -> None:
    """A replica's whole process group is stopped (an mpirun rank, a torchrun worker),
    not only the process that was started."""
    child_pid = tmp_path / "child.pid"
    spawn = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        f"open({str(child_pid)!r}, 'w').write(str(child.pid)); time.sleep(300)"
    )
    plan = _plan(
        tmp_path,
        _pytorchjob(master=spawn, worker="import time; time.sleep(1); raise SystemExit(1)"),
    )
    outcome = execute(plan, workdir=tmp_path, out=io.StringIO(), grace_seconds=1)
    assert outcome.phase == "Failed"
    deadline = time.monotonic() + 10
    while _alive(int(child_pid.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(child_pid.read_text())), "the master's child outlived the run"


def test_after_success_the_rest_get_time_to_finish_then_are_stopped(tmp_path: Path) -> None:
    """The master's exit decides the job; a worker finishing soon after keeps its last
    line and exit code, one that never ends is stopped after the settle time."""
    plan = _plan(
        tmp_path,
        _pytorchjob(
            master="print('master done')",
            worker="import os, time; "
            "time.sleep(0.5 + 60 * int(os.environ['RANK'] == '2')); print('bye')",
            workers=2,
        ),
    )
    out = io.StringIO()
    outcome = execute(plan, workdir=tmp_path, out=out, settle_seconds=3, grace_seconds=1)
    assert outcome.phase == "Succeeded", out.getvalue()
    assert outcome.exit_codes["worker-0"] == 0
    assert "[worker-0] bye\n" in out.getvalue()
    assert outcome.exit_codes["worker-1"] == 128 + signal.SIGTERM
    assert outcome.seconds < 30


def test_a_replica_that_obeys_sigterm_restarts_the_gang_as_a_killed_one_does(
    tmp_path: Path,
) -> None:
    """Exit 143 (stopped by SIGTERM, as a drained pod's trainer exits after checkpointing)
    is a stop from outside, not the program's failure: the gang starts again."""
    program = (
        "import os, sys; attempt = os.environ.get('KUBETRAIN_RESTART_ATTEMPT'); "
        "print('attempt', attempt, 'reason', os.environ.get('KUBETRAIN_RESTART_REASON')); "
        "sys.exit(0 if attempt else 143)"
    )
    plan = _plan(tmp_path, _pytorchjob(master=program, worker=None))
    out = io.StringIO()
    outcome = execute(plan, workdir=tmp_path, out=out, infrastructure_restarts=1)
    text = out.getvalue()
    assert outcome.phase == "Succeeded", text
    assert "master-0 was stopped (SIGTERM), an infrastructure failure" in text
    assert "[master-0] attempt 1 reason SIGTERM" in text
    # Without a budget it is the job's failure, with the code a shell reports.
    outcome = execute(plan, workdir=tmp_path, out=io.StringIO())
    assert (outcome.phase, outcome.exit_code) == ("Failed", 143)
