"""``kubetrain run --local TRAINJOB.yaml`` with real processes: upstream Trainer v2.3.0's
runtimes as they ship, the TrainJob overriding the trainer's command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.builders.trainer import UPSTREAM_TRAINER, initializer_rjob, rjob, runtime, trainjob
from tests.training.helpers import assert_trained, kubetrain

RUNTIMES = UPSTREAM_TRAINER / "manifests" / "base" / "runtimes"
TORCH = RUNTIMES / "torch_distributed.yaml"
DEEPSPEED = RUNTIMES / "deepspeed_distributed.yaml"


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def test_torchrun_nodes_train_ddp_to_identical_parameters(tmp_path: Path) -> None:
    job = trainjob(
        "ddp",
        runtimeRef={"name": "torch-distributed"},
        trainer={
            "numNodes": 2,
            "numProcPerNode": 2,
            "command": ["torchrun", "-m", "images.pytorch.train", "--steps", "30"],
        },
    )
    result = kubetrain(
        "run", "--local", str(write(tmp_path / "tj.yaml", job)), "--runtime", str(TORCH)
    )
    assert_trained(result, world_size=4, steps=30)
    assert "TrainJob/ddp Complete after" in result.output
    assert "every node pod completed (node-0 exit 0, node-1 exit 0)" in result.output
    # Lines carry the node and, from torchrun, the global rank.
    for node, rank in ((0, 0), (0, 1), (1, 2), (1, 3)):
        assert f"[node-{node}] [rank{rank}]:final rank={rank} " in result.output, result.output


def test_a_runtime_of_the_local_stack_with_its_own_command(tmp_path: Path) -> None:
    # torch-ddp-sample runs the sample trainer under the linear scaling rule; the TrainJob
    # only shortens the run (argparse keeps the last --steps).
    job = trainjob(
        "sample",
        runtimeRef={"name": "torch-ddp-sample"},
        trainer={"numNodes": 2, "numProcPerNode": 2, "args": ["--steps", "40"]},
    )
    result = kubetrain("run", "--local", str(write(tmp_path / "tj.yaml", job)), "--stack", "local")
    assert_trained(result, world_size=4, steps=40)
    assert "runs ClusterTrainingRuntime torch-ddp-sample (stack local" in result.output
    # 0.05 for one process of 32 samples, x 4 processes.
    assert "peak_lr=0.200000" in result.output


def test_initializers_complete_before_the_trainer_starts(tmp_path: Path) -> None:
    marker = tmp_path / "dataset" / "ready"
    init = initializer_rjob()
    init["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        f'sleep 1; mkdir -p {marker.parent}; echo "from $STORAGE_URI" > {marker}',
    ]
    node = rjob("node", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}])
    rt = runtime("TrainingRuntime", "with-init", rjobs=[init, node])
    job = trainjob(
        "init",
        runtimeRef={"name": "with-init", "kind": "TrainingRuntime"},
        initializer={"dataset": {"storageUri": "hf://org/set"}},
        trainer={"numNodes": 2, "command": ["sh", "-c", f"cat {marker}"]},
    )
    result = kubetrain("run", "--local", str(write(tmp_path / "tj.yaml", job, rt)))
    assert result.returncode == 0, result.output
    lines = result.output.splitlines()
    assert "kubetrain: node-0 waits for the 1 dataset-initializer pod(s) to be Complete" in lines
    assert "[node-0] from hf://org/set" in lines and "[node-1] from hf://org/set" in lines
    assert lines.index("kubetrain: starting node-0: sh -c 'cat " + str(marker) + "'") > next(
        i
        for i, line in enumerate(lines)
        if line.startswith("kubetrain: starting dataset-initializer-0")
    )
    assert "every dataset-initializer and node pod completed" in result.output


def test_a_failing_initializer_fails_the_trainjob_before_training(tmp_path: Path) -> None:
    init = rjob(
        "dataset-initializer", step="dataset-initializer", containers=("dataset-initializer",)
    )
    init["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        "exit 4",
    ]
    node = rjob("node", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}])
    rt = runtime("TrainingRuntime", "with-init", rjobs=[init, node])
    job = trainjob(
        "badinit",
        runtimeRef={"name": "with-init", "kind": "TrainingRuntime"},
        trainer={"command": ["sh", "-c", "echo trained"]},
    )
    result = kubetrain("run", "--local", str(write(tmp_path / "tj.yaml", job, rt)))
    assert result.returncode == 4, result.output
    assert "TrainJob/badinit Failed" in result.output
    assert "dataset-initializer-0 exited with code 4" in result.output
    assert "(dataset-initializer-0 exit 4, node-0 not started)" in result.output
    assert "trained" not in result.output and "starting node-0" not in result.output


def test_a_failing_node_fails_the_trainjob_with_its_exit_code(tmp_path: Path) -> None:
    job = trainjob(
        "fail",
        runtimeRef={"name": "torch-distributed"},
        trainer={
            "numNodes": 2,
            "command": ["sh", "-c", 'if [ "$PET_NODE_RANK" = 1 ]; then exit 9; fi; sleep 300'],
        },
    )
    result = kubetrain(
        "run", "--local", str(write(tmp_path / "tj.yaml", job)), "--runtime", str(TORCH)
    )
    assert result.returncode == 9, result.output
    assert "TrainJob/fail Failed" in result.output and "node-1 exited with code 9" in result.output


def test_mpi_runtimes_launch_every_rank_with_mpirun(tmp_path: Path) -> None:
    job = trainjob(
        "mpi",
        runtimeRef={"name": "deepspeed-distributed"},
        trainer={
            "numNodes": 2,
            "numProcPerNode": 2,
            "command": [
                "mpirun",
                "--allow-run-as-root",
                "--oversubscribe",
                "sh",
                "-c",
                'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE"',
            ],
        },
    )
    result = kubetrain(
        "run", "--local", str(write(tmp_path / "tj.yaml", job)), "--runtime", str(DEEPSPEED)
    )
    assert result.returncode == 0, result.output
    ranks = sorted(
        line for line in result.output.splitlines() if line.startswith("[launcher-0] rank")
    )
    assert ranks == [f"[launcher-0] rank {r} of 4" for r in range(4)], result.output
    assert "the node pods only serve sshd to the launcher" in result.output
    assert "TrainJob/mpi Complete" in result.output
