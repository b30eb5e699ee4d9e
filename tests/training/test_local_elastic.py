"""An elastic PyTorchJob and an elastic TrainJob run locally (``kubetrain run --local
--scale``): real torchrun nodes on 127.0.0.1, scaled 2 -> 3 -> 2 while they train, each
re-formed group resuming from the sample's last checkpoint."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kubetrain.manifest import parse_yaml
from tests.builders.trainer import UPSTREAM_TRAINER, trainjob
from tests.training.helpers import IMAGES, kubetrain

SAMPLE = IMAGES / "pytorch" / "pytorchjob-elastic.yaml"
STEPS = 75  # the sample job's --steps
TORCH = UPSTREAM_TRAINER / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"
TRAINJOB_STEPS = 45
RDZV_CONF = "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2"


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


def test_elastic_trainjob_scales_its_nodes_and_resumes(tmp_path: Path) -> None:
    # torchrun prefixes each rank's lines here ("[node-0] [rank0]:..."). Upstream's
    # torch-distributed made elastic (kubetrain's elasticPolicy, KEP-2903's
    # shape) and a TrainJob of two nodes running the sample, scaled 2 -> 3 -> 2.
    runtime = parse_yaml(TORCH.read_text())
    runtime["spec"]["mlPolicy"]["torch"] = {
        "elasticPolicy": {"minNodes": 1, "maxNodes": 3, "maxRestarts": 3}
    }
    job = trainjob(
        "elastic",
        runtimeRef={"name": runtime["metadata"]["name"]},
        trainer={
            "numNodes": 2,
            "command": [
                "torchrun",
                "-m",
                "images.pytorch.train",
                *("--steps", str(TRAINJOB_STEPS), "--checkpoint-every", "1"),
                *("--step-delay", "0.3"),
            ],
            # torchrun's rendezvous timeouts, short so each change re-forms in seconds.
            "env": [{"name": "PET_RDZV_CONF", "value": RDZV_CONF}],
        },
    )
    path = tmp_path / "elastic.yaml"
    path.write_text(yaml.safe_dump_all([job, runtime], sort_keys=False))
    result = kubetrain("run", "--local", str(path), "--scale", "3@step=5", "--scale", "2@step=30")
    output = result.output
    assert result.returncode == 0, output
    assert "TrainJob/elastic Complete" in output, output
    worlds = [int(w) for w in re.findall(r"\[rank0\]:training: world_size=(\d+) ", output)]
    assert worlds == [2, 3, 2], output
    resumes = re.findall(r"\[rank0\]:resume step=(\d+) world_size=(\d+) ", output)
    points = [int(step) for step, _ in resumes]
    assert len(points) == 2 and 5 <= points[0] < points[1] < TRAINJOB_STEPS, output
    finals = re.findall(r"\]:final rank=(\d+) step=(\d+) params_sha256=([0-9a-f]{64})", output)
    assert sorted(int(rank) for rank, _, _ in finals) == [0, 1], output
    assert {(int(step), digest) for _, step, digest in finals} == {(TRAINJOB_STEPS, finals[0][2])}
    reformed = re.findall(r"elastic: (\d) -> (\d) nodes re-formed in [0-9.]+s", output)
    assert reformed == [("2", "3"), ("3", "2")], output
