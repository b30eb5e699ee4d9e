"""The PyTorch DDP sample, run as real processes with torch.distributed (gloo)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.training.helpers import (
    HANG_GUARD_SECONDS,
    IMAGES,
    assert_trained,
    kubetrain,
    load_manifest,
    with_command,
    write_manifest,
)

SAMPLE = IMAGES / "pytorch" / "pytorchjob.yaml"


def test_sample_job_trains_in_two_processes_and_ranks_agree() -> None:
    result = kubetrain("run", "--local", str(SAMPLE))
    assert_trained(result, world_size=2, steps=40)
    assert "PyTorchJob/pytorch-sample Succeeded" in result.output
    # Each replica's output is prefixed with its name.
    assert "[master-0] final rank=0 " in result.output
    assert "[worker-0] final rank=1 " in result.output


def test_torchrun_starts_nproc_per_node_processes_from_the_pet_variables(tmp_path: Path) -> None:
    manifest = load_manifest(SAMPLE)
    manifest["spec"]["nprocPerNode"] = "2"
    del manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    manifest = with_command(manifest, ["torchrun", "-m", "images.pytorch.train", "--steps", "30"])
    result = kubetrain("run", "--local", str(write_manifest(manifest, tmp_path / "job.yaml")))
    assert_trained(result, world_size=2, steps=30)


def _run_steps(tmp_path: Path, steps: int, checkpoint_dir: Path) -> str:
    manifest = with_command(
        load_manifest(SAMPLE),
        ["python", "-m", "images.pytorch.train", "--steps", str(steps), "--checkpoint-every", "5"],
    )
    path = write_manifest(manifest, tmp_path / f"job-{steps}.yaml")
    result = kubetrain("run", "--local", str(path), "--env", f"CHECKPOINT_DIR={checkpoint_dir}")
    assert result.returncode == 0, result.output
    return result.output


def test_resumed_run_continues_from_its_checkpoint_step(tmp_path: Path) -> None:
    interrupted = tmp_path / "interrupted"
    first = _run_steps(tmp_path, 12, interrupted)
    assert f"checkpoint step=12 path={interrupted / 'checkpoint.pt'}" in first

    resumed = kubetrain_output = _run_steps(tmp_path, 24, interrupted)
    assert f"resumed from {interrupted} at step 12" in resumed
    steps = [
        int(line.split("step=")[1].split()[0]) for line in resumed.splitlines() if "] step=" in line
    ]
    assert steps == list(range(13, 25)), kubetrain_output

    straight = _run_steps(tmp_path, 24, tmp_path / "straight")
    digest = [
        line.split("params_sha256=")[1] for line in resumed.splitlines() if "final rank=0" in line
    ]
    expected = [
        line.split("params_sha256=")[1] for line in straight.splitlines() if "final rank=0" in line
    ]
    # Same data, same optimizer state: resuming lands exactly where an uninterrupted run does.
    assert digest == expected and len(digest) == 1


def _child_with(parent: int, variable: str) -> int:
    """The pid of ``parent``'s child process whose environment holds ``variable``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and variable.encode() in environ:
            return int(entry.name)
    raise AssertionError(f"no child of {parent} has {variable} in its environment")


def _run_signalling_rank_1(
    tmp_path: Path, trainer: list[str], when: str, signal_rank_1: Callable[[int], None]
) -> tuple[int, str]:
    """``kubetrain run --local`` of the sample with ``trainer`` as its command and a
    checkpoint directory; once a line contains ``when``, ``signal_rank_1`` gets the pid of
    rank 1's process. (The run's exit code, its whole output.)"""
    manifest = with_command(
        load_manifest(SAMPLE), ["python", "-m", "images.pytorch.train", *trainer]
    )
    path = write_manifest(manifest, tmp_path / "job.yaml")
    command = [sys.executable, "-m", "kubetrain.cli", "run", "--local", str(path)]
    process = subprocess.Popen(
        [*command, "--env", f"CHECKPOINT_DIR={tmp_path / 'checkpoints'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            if when in line:
                signal_rank_1(_child_with(process.pid, "RANK=1"))
                break
        output = "".join(lines) + process.communicate(timeout=HANG_GUARD_SECONDS)[0]
    finally:
        if process.poll() is None:
            process.kill()
    assert any(when in line for line in lines), output
    return process.returncode, output


def test_a_killed_rank_restarts_the_gang_from_its_checkpoint(tmp_path: Path) -> None:
    """A rank killed from outside (SIGKILL to its process group: locally, a lost node)
    restarts both ranks as attempt 1; they resume from the last checkpoint and finish
    every step, as the operator's gang restart does."""
    saved = 10
    code, output = _run_signalling_rank_1(
        tmp_path,
        ["--steps", "30", "--checkpoint-every", "5", "--step-delay", "0.2"],
        f"[master-0] checkpoint step={saved} ",
        lambda pid: os.killpg(pid, signal.SIGKILL),
    )
    assert code == 0, output
    assert "worker-0 was killed (SIGKILL), an infrastructure failure" in output, output
    assert "infrastructure restarts used: 1 of 10" in output
    resumed = re.search(r"resume step=(\d+) .* attempt=1 reason=SIGKILL", output)
    assert resumed is not None and int(resumed.group(1)) >= saved, output
    finals = re.findall(r"final rank=(\d) step=30 params_sha256=(\w+)", output)
    assert sorted(rank for rank, _ in finals) == ["0", "1"] and len({d for _, d in finals}) == 1


def test_a_sigtermed_rank_checkpoints_the_step_it_finished_and_loses_none(
    tmp_path: Path,
) -> None:
    """SIGTERM to one rank (a drain evicts the pods of one node): both ranks stop after the
    same step, rank 0 checkpoints it, and they exit 143; the gang restarts as attempt 1
    and resumes from that very step (nothing trained twice), ending where an uninterrupted
    run ends."""
    steps = 24
    code, output = _run_signalling_rank_1(
        tmp_path,
        ["--steps", str(steps), "--checkpoint-every", "100", "--step-delay", "0.2"],
        "[master-0] step=6 ",
        lambda pid: os.kill(pid, signal.SIGTERM),
    )
    assert code == 0, output
    saved = re.search(r"\[master-0\] checkpoint step=(\d+) \S+ on=SIGTERM", output)
    assert saved is not None, output
    stopped_at = int(saved.group(1))
    assert 6 <= stopped_at < steps, output
    for rank, replica in enumerate(("master-0", "worker-0")):
        assert f"[{replica}] rank {rank}: stopped after step {stopped_at} on SIGTERM" in output
    # Both exited 143 at once; the runner names whichever it saw first.
    assert re.search(r"-0 was stopped \(SIGTERM\), an infrastructure failure", output), output
    resumed = re.search(r"resume step=(\d+) .* attempt=1 reason=SIGTERM", output)
    assert resumed is not None and int(resumed.group(1)) == stopped_at, output
    trained = [int(s) for s in re.findall(r"\[master-0\] step=(\d+) ", output)]
    assert trained == list(range(1, steps + 1)), trained
    finals = set(re.findall(r"final rank=\d step=24 params_sha256=(\w+)", output))
    straight = set(
        re.findall(r"final rank=0 step=24 params_sha256=(\w+)", _run_steps(tmp_path, 24, tmp_path))
    )
    assert len(finals) == 1 and finals == straight, (finals, straight)
