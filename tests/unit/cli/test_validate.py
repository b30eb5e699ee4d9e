"""``kubetrain validate``: summaries on success, every error with its path on failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubetrain.cli import main
from tests.conftest import EXAMPLES, REPO_ROOT

GOOD = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))


def test_validate_examples_prints_one_line_per_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *GOOD]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(GOOD)
    assert any(
        "PyTorchJob/pytorch-ddp: Master x1, Worker x3, nprocPerNode 8" in line for line in out
    )
    assert any(
        "MPIJob/horovod: Launcher x1, Worker x2, 8 slot(s) per worker" in line for line in out
    )


def test_rejects_three_mistakes_reporting_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLES / "invalid" / "three-mistakes.yaml")]) == 1
    err = capsys.readouterr().err
    assert 'spec.pytorchReplicaSpecs.Master.restartPolicy: "Sometimes" is invalid' in err
    assert "spec.pytorchReplicaSpecs.Worker.replicas: -1 is invalid: must be >= 0" in err
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.spec.contianers: unknown field: "
        "did you mean 'containers'?" in err
    )


def test_rejects_every_bad_document_in_a_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = (EXAMPLES / "tfjob.yaml").read_text()
    bad = good.replace("replicas: 2", "replicas: -2").replace("name: tf-ps", "name: tf-bad")
    stream = tmp_path / "jobs.yaml"
    stream.write_text(f"{good}\n---\n{bad}\n---\n{bad.replace('kind: TFJob', 'kind: Nope')}")
    assert main(["validate", str(stream)]) == 1
    captured = capsys.readouterr()
    assert "ok" in captured.out and "TFJob/tf-ps" in captured.out
    assert (
        "document 2" in captured.err and "spec.tfReplicaSpecs.Worker.replicas: -2" in captured.err
    )
    assert "document 3" in captured.err and 'kind: "Nope" is invalid' in captured.err
    assert "2 of 3 document(s) invalid" in captured.err


def test_rejects_missing_file_and_bad_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed")
    assert main(["validate", str(tmp_path / "nope.yaml"), str(broken)]) == 1
    err = capsys.readouterr().err
    assert "nope.yaml: cannot read" in err
    assert "broken.yaml" in err and "valid YAML" in err


def test_crds_command_prints_three_crds(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    assert main(["crds"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs] == [
        "pytorchjobs.kubeflow.org",
        "tfjobs.kubeflow.org",
        "mpijobs.kubeflow.org",
    ]


def test_console_script_runs() -> None:
    exe = Path(sys.executable).parent / "kubetrain"
    result = subprocess.run(
        [str(exe), "validate", str(EXAMPLES / "mpijob.yaml")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")
