"""The Horovod sample: under horovodrun (Gloo) and as an MPIJob through real mpirun."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.training.helpers import IMAGES, assert_trained, kubetrain, run

SAMPLE = IMAGES / "horovod" / "mpijob.yaml"


def test_horovodrun_gloo_trains_in_two_processes_and_ranks_agree() -> None:
    horovodrun = str(Path(sys.executable).parent / "horovodrun")
    result = run(
        [
            horovodrun,
            "--gloo",
            "-np",
            "2",
            "-H",
            "localhost:2",
            sys.executable,
            "-m",
            "images.horovod.train",
            "--steps",
            "30",
        ]
    )
    assert_trained(result, world_size=2, steps=30)


def test_mpijob_sample_runs_through_mpirun_with_the_operator_hostfile() -> None:
    plan = kubetrain("run", "--local", "--dry-run", str(SAMPLE))
    assert plan.returncode == 0, plan.output
    # Two workers x one slot, all on this machine: one hostfile line.
    assert "localhost slots=2\n" in plan.output
    assert "OMPI_MCA_orte_default_hostfile=" in plan.output

    result = kubetrain("run", "--local", str(SAMPLE))
    assert "kubetrain: starting launcher-0: mpirun --allow-run-as-root -np 2" in result.output
    assert_trained(result, world_size=2, steps=40)
    assert "MPIJob/horovod-sample Succeeded" in result.output
