"""benchmarks/cpu_profile.py: parts named by what starts them, and the CPU of processes too
short-lived to be sampled counted through the parent that reaped them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks import cpu_profile
from benchmarks.cpu_profile import Sampler, main, name_part

BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass"


def test_parts_are_named_by_the_process_that_starts_them() -> None:
    pytest_argv = [
        ".venv/bin/python",
        "-m",
        "pytest",
        "--junitxml=/r/build/test-results/cluster-operator.xml",
    ]
    assert name_part(1, pytest_argv) == "tests cluster-operator"
    assert name_part(1, [".venv/bin/python", "-m", "tests.tiers"]) == "runner"
    make = ["make", "--no-print-directory", "-j1"]
    assert name_part(1, [*make, "cluster-tools"]) == "go lane"
    assert name_part(1, [*make, "training-deps"]) == "setup training-deps"
    assert name_part(1, ["make", "--no-print-directory", "-s", "test-setup-goals"]) is None
    assert name_part(1, [".venv/bin/mypy"]) == "lint mypy"
    assert name_part(1, ["sleep", "1"]) is None


def test_a_go_build_is_named_by_its_tool_modules_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cpu_profile, "_cwd", lambda pid: "/r/cluster/tools/kueue")
    assert name_part(7, ["go", "build", "-o", "x", "sigs.k8s.io/kueue/cmd/kueue"]) == "go kueue"
    monkeypatch.setattr(cpu_profile, "_cwd", lambda pid: "/tmp")
    assert name_part(7, ["go", "mod", "download", "sigs.k8s.io/kueue@v0.17.0"]) is None


def _profiled(script: str) -> dict[str, float]:
    """The CPU seconds per part of ``python -c script``, sampled before it starts and after
    it ends, so everything it and its children did happens between two samples."""
    sampler = Sampler()
    sampler.sample()
    child = subprocess.Popen([sys.executable, "-c", script])
    sampler.root = child.pid
    sampler.sample()
    child.wait()
    sampler.sample()
    return dict(sampler.profile.seconds)


def test_reaped_childrens_cpu_goes_to_the_parent_once() -> None:
    """A child that burns half a CPU-second and exits between two samples is never seen
    itself: its time shows in its parent's reaped time, and is counted once, as the
    command's (what the rest of the machine does meanwhile is outside it)."""
    burn = BURN.format(seconds=0.5)
    script = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}])"
    command = _profiled(script)[cpu_profile.COMMAND]
    assert 0.45 <= command <= 0.9, command


def test_a_chain_that_ends_between_two_samples_is_counted_once() -> None:
    """Two children seen while they burn, then they, their parent and its own parent all
    exit before the next sample: what the children were seen to spend is in the reaped
    time of every ancestor, and counts once (it counted twice before the fix)."""
    burn = BURN.format(seconds=0.5)
    script = (
        "import subprocess, sys, time\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', {burn!r}]) for _ in range(2)]\n"
        "time.sleep(0.3)\n"
        "print('seen', flush=True)\n"
        "[kid.wait() for kid in kids]\n"
    )
    sampler = Sampler()
    sampler.sample()
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    sampler.root = child.pid
    assert child.stdout is not None
    child.stdout.readline()  # the children are running
    sampler.sample()  # ... and seen
    child.wait()
    sampler.sample()
    command = sampler.profile.seconds[cpu_profile.COMMAND]
    assert 0.95 <= command <= 1.6, command


def test_a_command_line_is_split_without_a_trailing_empty_argument() -> None:
    """/proc's command lines end in a NUL: the last argument is the make goal, not ''."""
    assert cpu_profile._cmdline(os.getpid())[-1] != ""
    assert name_part(1, ["make", "--no-print-directory", "test"]) is None


def test_the_command_runs_and_its_exit_status_is_returned() -> None:
    assert main(["--interval", "0.2", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3


def test_rejects_a_missing_command_and_a_bad_interval(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([])
    assert "a command to run is expected after --" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--interval", "0", "--", "true"])
    assert "--interval must be above 0 seconds, got 0.0" in capsys.readouterr().err
