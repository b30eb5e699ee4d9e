"""The TensorFlow MultiWorkerMirroredStrategy sample, two workers from TF_CONFIG."""

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

SAMPLE = IMAGES / "tensorflow" / "tfjob.yaml"


def test_tfjob_sample_trains_in_two_workers_and_they_agree() -> None:
    result = kubetrain("run", "--local", str(SAMPLE))
    assert_trained(result, world_size=2, steps=40)
    assert "TFJob/tensorflow-sample Succeeded" in result.output


def test_resumed_tfjob_continues_from_the_chief_checkpoint(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"

    def steps(count: int) -> str:
        manifest = with_command(
            load_manifest(SAMPLE),
            [
                "python",
                "-m",
                "images.tensorflow.train",
                "--steps",
                str(count),
                "--checkpoint-every",
                "5",
            ],
        )
        path = write_manifest(manifest, tmp_path / f"job-{count}.yaml")
        result = kubetrain("run", "--local", str(path), "--env", f"CHECKPOINT_DIR={checkpoints}")
        assert result.returncode == 0, result.output
        return result.output

    steps(10)
    resumed = steps(20)
    assert f"rank 0: resumed from {checkpoints} at step 10" in resumed
    assert f"rank 1: resumed from {checkpoints} at step 10" in resumed
    logged = [
        int(line.split("step=")[1].split()[0]) for line in resumed.splitlines() if "] step=" in line
    ]
    assert logged == list(range(11, 21)), resumed
    # Only the chief's checkpoints remain; the other worker's scratch copies are removed.
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.startswith(".")) == []
