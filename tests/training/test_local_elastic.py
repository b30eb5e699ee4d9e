"""An elastic PyTorchJob run locally (``kubetrain run --local --scale``): real torchrun nodes
on 127.0.0.1, scaled 2 -> 3 -> 2 while they train, each re-formed group resuming from the
sample's last checkpoint."""

from __future__ import annotations

import re

from tests.training.helpers import IMAGES, kubetrain

SAMPLE = IMAGES / "pytorch" / "pytorchjob-elastic.yaml"
STEPS = 75  # the sample job's --steps


def test_elastic_job_scales_up_and_down_and_resumes_from_its_last_step() -> None:
    result = kubetrain("run", "--local", str(SAMPLE), "--scale", "3@step=5", "--scale", "2@step=60")
    output = result.output
    assert result.returncode == 0, output
    assert "PyTorchJob/pytorch-elastic-sample Succeeded" in output
    assert "worker-2 removed" in output

    # The group's size, each time rank 0 (re)started: 2, then 3, then 2 again.
    worlds = [int(w) for w in re.findall(r"\] training: world_size=(\d+) ", output)]
    assert worlds == [2, 3, 2], output
    # The learning rate follows the linear scaling rule for each group.
    resumes = re.findall(r"\] resume step=(\d+) world_size=(\d+) peak_lr=([0-9.]+)", output)
    assert [(int(w), float(lr)) for _, w, lr in resumes] == [(3, 0.15), (2, 0.1)], output
    # Each group went on from the last checkpoint: never from step 0, never backwards.
    points = [int(step) for step, _, _ in resumes]
    assert 5 <= points[0] < points[1] < STEPS, output
    steps = [int(s) for s in re.findall(r"\] step=(\d+) loss=", output)]
    assert steps.count(1) == 1 and max(steps) == STEPS, output
    after_first = steps.index(points[0] + 1)
    assert all(s > points[0] for s in steps[after_first:]), output

    # Every rank of the last group ends on the same weights, at the planned step.
    finals = re.findall(r"\] final rank=(\d+) step=(\d+) params_sha256=([0-9a-f]{64})", output)
    assert sorted(int(rank) for rank, _, _ in finals) == [0, 1], output
    assert {(int(step), digest) for _, step, digest in finals} == {(STEPS, finals[0][2])}

    # The time from each decision to the re-formed group's first step is reported.
    reformed = re.findall(r"elastic: (\d) -> (\d) nodes re-formed in [0-9.]+s", output)
    assert reformed == [("2", "3"), ("3", "2")], output
