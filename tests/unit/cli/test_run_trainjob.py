"""``kubetrain run --local --dry-run TRAINJOB.yaml``: where the runtime is found (beside
the TrainJob, ``--runtime``, ``--stack``) and what each node would run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.cli import main
from kubetrain.manifest import parse_yaml
from tests.builders.trainer import UPSTREAM_TRAINER, trainjob
from tests.conftest import REPO_ROOT

TORCH_RUNTIME = UPSTREAM_TRAINER / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def hello(runtime: str = "torch-distributed", **ref: str) -> dict[str, Any]:
    return trainjob(
        "hello",
        runtimeRef={"name": runtime, **ref},
        trainer={"numNodes": 2, "numProcPerNode": 3, "command": ["torchrun", "train.py"]},
    )


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", "--local", "--dry-run", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def node_env(out: str, label: str) -> dict[str, str]:
    """The variables ``--dry-run`` prints under ``label``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{label} ("))
    env = {}
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        name, _, value = line.strip().partition("=")
        env[name] = value
    return env


def test_a_runtime_in_the_same_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runtime = parse_yaml(TORCH_RUNTIME.read_text())
    path = write(tmp_path / "both.yaml", hello(), runtime)
    code, out, err = dry_run(capsys, str(path))
    assert code == 0, err
    assert f"runs ClusterTrainingRuntime torch-distributed ({path})" in out
    assert "node-0 (node): torchrun train.py" in out and "node-1 (node): torchrun train.py" in out
    env = node_env(out, "node-1")
    assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "3"
    assert env["PET_NODE_RANK"] == "1" and env["PET_MASTER_ADDR"] == "127.0.0.1"
    assert env["PET_MASTER_PORT"] == node_env(out, "node-0")["PET_MASTER_PORT"]


def test_a_runtime_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "job.yaml", hello())
    code, out, err = dry_run(capsys, str(path), "--runtime", str(TORCH_RUNTIME))
    assert code == 0, err
    assert f"runs ClusterTrainingRuntime torch-distributed ({TORCH_RUNTIME})" in out


def test_a_training_runtime_must_share_the_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = parse_yaml(TORCH_RUNTIME.read_text())
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = "team-a"
    job = hello(kind="TrainingRuntime")
    job["metadata"]["namespace"] = "team-b"
    code, _, err = dry_run(capsys, str(write(tmp_path / "job.yaml", job, runtime)))
    assert code == 2
    assert "names TrainingRuntime torch-distributed, which is not among the runtimes" in err
    job["metadata"]["namespace"] = "team-a"
    code, out, err = dry_run(capsys, str(write(tmp_path / "job.yaml", job, runtime)))
    assert code == 0, err
    assert "runs TrainingRuntime torch-distributed" in out


def test_fails_naming_where_it_looked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "job.yaml", hello("torch-h100"))
    code, _, err = dry_run(capsys, str(path))
    assert code == 2
    assert (
        "TrainJob/hello names ClusterTrainingRuntime torch-h100, which is not among the "
        f"runtimes given (pass --runtime RUNTIME.yaml or --stack NAME): {path}: no runtime"
    ) in err
    code, _, err = dry_run(capsys, str(path), "--runtime", str(TORCH_RUNTIME))
    assert f"{TORCH_RUNTIME}: ClusterTrainingRuntime torch-distributed" in err


def test_fails_on_an_invalid_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runtime = parse_yaml(TORCH_RUNTIME.read_text())
    broken = copy.deepcopy(runtime)
    broken["spec"]["mlPolicy"]["numNodes"] = 0
    code, _, err = dry_run(
        capsys,
        str(write(tmp_path / "job.yaml", hello())),
        "--runtime",
        str(write(tmp_path / "rt.yaml", broken)),
    )
    assert code == 1
    assert "spec.mlPolicy.numNodes" in err


def test_a_runtime_for_a_v1_job_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = parse_yaml((REPO_ROOT / "examples" / "pytorchjob.yaml").read_text())
    code, _, err = dry_run(
        capsys, str(write(tmp_path / "job.yaml", job)), "--runtime", str(TORCH_RUNTIME)
    )
    assert code == 2
    assert "uses no runtime: runtimes (in the file, --runtime, --stack) are for a TrainJob" in err


def test_a_file_must_hold_one_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = dry_run(capsys, str(write(tmp_path / "two.yaml", hello(), hello())))
    assert code == 1
    assert "exactly one job document" in err and "found 2" in err


def test_a_stacks_written_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    dist = tmp_path / "dist"
    assert main(["synth", "local", "--out", str(dist)]) == 0
    (version,) = (dist / "local").iterdir()
    capsys.readouterr()
    path = write(tmp_path / "job.yaml", hello())
    code, out, err = dry_run(capsys, str(path), "--stack", "local", "--dist", str(dist))
    assert code == 0, err
    assert (
        f"runs ClusterTrainingRuntime torch-distributed (stack local {version.name} as "
        f"written in {version})"
    ) in out
    assert node_env(out, "node-1")["PET_NODE_RANK"] == "1"


def test_a_stack_rendered_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    path = write(tmp_path / "job.yaml", hello("no-such-runtime"))
    code, _, err = dry_run(capsys, str(path), "--stack", "local", "--dist", str(tmp_path))
    assert code == 2
    written = tmp_path / "local" / "0.1.0"
    # Where it looked, and the runtimes the stack has.
    assert f"stack local 0.1.0 rendered now ({written} does not exist): " in err
    assert (
        "ClusterTrainingRuntime torch-distributed, ClusterTrainingRuntime torch-ddp-sample" in err
    )
    code, _, err = dry_run(capsys, str(path), "--stack", "nope")
    assert code == 2 and "--stack nope: no such stack; choose one of" in err
