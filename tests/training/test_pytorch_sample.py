"""The PyTorch DDP sample, run as real processes with torch.distributed (gloo)."""

from __future__ import annotations

from pathlib import Path

from tests.training.helpers import (
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
