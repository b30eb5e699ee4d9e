"""Sample jobs: the linear scaling rule reaches the trainers through their arguments."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from images.common import trainkit
from kubetrain.constructs.samples import (
    HorovodSample,
    HorovodSampleProps,
    LinearScaling,
    PyTorchDdpSample,
    PyTorchDdpSampleProps,
    TensorFlowMwmsSample,
    TensorFlowMwmsSampleProps,
)
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot
from tests.unit.constructs.jobs_helpers import synth

SCALING = LinearScaling(base_lr=0.1, batch_size=64, steps=1000)


def _trainer_schedule(args: list[str], world_size: int) -> trainkit.LearningRateSchedule:
    """Parse the job's arguments with the trainers' own option parser."""
    parser = argparse.ArgumentParser()
    trainkit.add_common_arguments(parser)
    options, _ = parser.parse_known_args(args)
    return trainkit.schedule_from_args(options, world_size)


def _container(obj: dict[str, Any], replica_type: str) -> dict[str, Any]:
    field = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    container: dict[str, Any] = obj["spec"][field][replica_type]["template"]["spec"]["containers"][
        0
    ]
    return container


CASES: dict[str, tuple[Any, int, str, str]] = {
    # name: (builder, world size, replica type that trains, snapshot file)
    "pytorch-4x8": (
        lambda chart: PyTorchDdpSample(
            chart, "Ddp", PyTorchDdpSampleProps(nodes=4, gpus_per_node=8, scaling=SCALING)
        ),
        32,
        "Worker",
        "samples/pytorch-ddp-4x8.yaml",
    ),
    "horovod-2x8": (
        lambda chart: HorovodSample(
            chart, "Hvd", HorovodSampleProps(workers=2, gpus_per_node=8, scaling=SCALING)
        ),
        16,
        "Launcher",
        "samples/horovod-2x8.yaml",
    ),
    "tensorflow-3-cpu": (
        lambda chart: TensorFlowMwmsSample(
            chart, "Tf", TensorFlowMwmsSampleProps(workers=3, scaling=SCALING)
        ),
        3,
        "Worker",
        "samples/tensorflow-mwms-3.yaml",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_sample_scales_learning_rate_with_world_size(case: str) -> None:
    build, world_size, trainer_type, snapshot = CASES[case]
    (obj,) = synth(build)
    container = _container(obj, trainer_type)
    argv = [*container.get("command", []), *container.get("args", [])]
    schedule = _trainer_schedule(argv, world_size)
    assert schedule.peak_lr == pytest.approx(SCALING.peak_lr(world_size))
    assert schedule.peak_lr == pytest.approx(0.1 * world_size)
    assert schedule.warmup_steps == 50
    assert obj["metadata"]["annotations"]["kubetrain.dev/learning-rate"] == (
        f"0.1 x {world_size} processes = {0.1 * world_size:g} after 50 warmup steps "
        f"(global batch {64 * world_size})"
    )
    assert_valid([obj])
    assert_snapshot(snapshot, dump_all([obj]))


def test_pytorch_sample_uses_torchrun_for_several_gpus() -> None:
    (gpu,) = synth(
        lambda chart: PyTorchDdpSample(chart, "D", PyTorchDdpSampleProps(nodes=2, gpus_per_node=8))
    )
    (cpu,) = synth(lambda chart: PyTorchDdpSample(chart, "D", PyTorchDdpSampleProps(nodes=2)))
    assert _container(gpu, "Master")["command"][:2] == ["torchrun", "-m"]
    assert _container(cpu, "Master")["command"][:2] == ["python", "-m"]
    assert gpu["spec"]["nprocPerNode"] == "8" and cpu["spec"]["nprocPerNode"] == "1"


def test_horovod_launcher_runs_mpirun_over_all_slots() -> None:
    (obj,) = synth(
        lambda chart: HorovodSample(chart, "H", HorovodSampleProps(workers=2, gpus_per_node=4))
    )
    command = _container(obj, "Launcher")["command"]
    assert command[:4] == ["mpirun", "--allow-run-as-root", "-np", "8"]
    assert command[command.index("python") :][:3] == ["python", "-m", "images.horovod.train"]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"base_lr": 0}, "base_lr (0) must be > 0"),
        ({"batch_size": 0}, "batch_size (0) must be >= 1"),
        ({"steps": 10, "warmup_steps": 20}, "warmup_steps (20) must be between 0 and steps (10)"),
    ],
    ids=["zero-lr", "zero-batch", "warmup-longer-than-training"],
)
def test_fails_on_bad_scaling(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        LinearScaling(**props)
    assert message in str(caught.value)


def test_fails_on_zero_nodes() -> None:
    with pytest.raises(ValueError) as caught:
        PyTorchDdpSampleProps(nodes=0)
    assert "nodes (0) must be >= 1" in str(caught.value)
