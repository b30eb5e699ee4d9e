"""``kubetrain synth`` end to end: deterministic, versioned and atomic (the same output as
the real ``cdk8s synth``: tests/tools/test_cdk8s_cli.py); plus ``kubetrain diff``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

KUBETRAIN = str(Path(sys.executable).parent / "kubetrain")


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBETRAIN, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the stacks package, free to edit."""
    root = tmp_path / "project"
    shutil.copytree(
        REPO_ROOT / "stacks", root / "stacks", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root


def test_synth_is_deterministic_across_directories(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "dist", tmp_path / "b" / "dist"
    for out in (first, second):
        result = run("synth", "--out", str(out), "--root", str(REPO_ROOT), cwd=out.parent.parent)
        assert result.returncode == 0, result.stderr
    assert tree(first) == tree(second)
    for path, body in tree(first).items():
        text = body.decode()
        assert str(tmp_path) not in text and str(REPO_ROOT) not in text, path
        assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", text), f"timestamp in {path}"


def test_synth_summary_and_lock(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k != "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
    }
    result = run(
        "synth", "local", "--out", str(tmp_path), "--root", str(REPO_ROOT), cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "end-of-life" not in result.stdout + result.stderr
    assert result.stdout.strip() == (
        "local 0.1.0: 42 objects (crds 9, operator 23, runtimes 7, samples 3) -> "
        f"{tmp_path}/local/0.1.0 [written]"
    )
    lock = json.loads((tmp_path / "local" / "0.1.0" / "manifest.lock.json").read_text())
    assert lock["stack"] == "local" and lock["version"] == "0.1.0" and lock["kubetrainVersion"]
    assert "01-operator/0010-deployment-kubetrain-operator.yaml" in lock["files"]
    assert all(v.startswith("sha256:") and len(v) == 71 for v in lock["files"].values())
    again = run("synth", "local", "--out", str(tmp_path), "--root", str(REPO_ROOT), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.rstrip().endswith("[unchanged]")


def test_changed_version_fails_then_bump_writes_the_next(project: Path) -> None:
    out = project / "dist"
    assert (
        run("synth", "local", "--out", str(out), "--root", str(project), cwd=project).returncode
        == 0
    )
    local = project / "stacks" / "local.py"
    local.write_text(
        local.read_text().replace(
            "TrainingOperatorProps(image=OPERATOR_IMAGE)",
            "TrainingOperatorProps(image=OPERATOR_IMAGE, replicas=2)",
        )
    )
    before = tree(out)
    failed = run("synth", "local", "--out", str(out), "--root", str(project), cwd=project)
    assert failed.returncode == 1
    assert "version 0.1.0 already exists with other content" in failed.stderr
    assert "changed: Deployment kubetrain-system/kubetrain-operator" in failed.stderr
    assert "added: Role kubetrain-system/kubetrain-operator-leader-election" in failed.stderr
    assert "--bump patch|minor|major" in failed.stderr
    assert tree(out) == before  # nothing lost, nothing half-written

    bumped = run(
        "synth", "local", "--out", str(out), "--root", str(project), "--bump", "minor", cwd=project
    )
    assert bumped.returncode == 0, bumped.stderr
    assert "local 0.2.0:" in bumped.stdout
    assert 'version="0.2.0"' in local.read_text()
    assert (out / "local" / "0.1.0").is_dir() and (out / "local" / "0.2.0").is_dir()
    app = (out / "local" / "0.2.0" / "argocd" / "applications" / "local-operator.yaml").read_text()
    assert "path: dist/local/0.2.0/01-operator" in app

    diff = run("diff", "local", "0.1.0", "0.2.0", "--out", str(out), cwd=project)
    assert diff.returncode == 1
    assert "+ Role kubetrain-system/kubetrain-operator-leader-election" in diff.stdout
    assert "~ Deployment kubetrain-system/kubetrain-operator" in diff.stdout
    assert "spec.replicas: 1 -> 2" in diff.stdout
    assert "--leader-elect=false" in diff.stdout and "--leader-elect=true" in diff.stdout
    same = run("diff", "local", "0.2.0", "0.2.0", "--out", str(out), cwd=project)
    assert same.returncode == 0 and same.stdout == "no differences\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # Checked when the props are made: the stack file is named.
        ("gpus_per_node=-1", "stacks/local.py: gpus_per_node (-1) must be >= 0"),
        # Checked while the construct tree is built: the construct path is named.
        (
            "resources=Resources(gpus=2)",
            "samples/pytorch-ddp: resources.gpus (2) must not be set on a job",
        ),
    ],
    ids=["props", "construct"],
)
def test_rejects_invalid_props_and_leaves_dist_untouched(
    project: Path, change: str, message: str
) -> None:
    out = project / "dist"
    (out / "local").mkdir(parents=True)
    (out / "local" / "keep.txt").write_text("mine")
    local = project / "stacks" / "local.py"
    original = "PyTorchDdpSampleProps(nodes=2, scaling=_SCALING, resources=_SMALL)"
    assert original in local.read_text()
    local.write_text(
        local.read_text().replace(original, f"PyTorchDdpSampleProps(nodes=2, {change})")
    )
    result = run("synth", "local", "--out", str(out), "--root", str(project), cwd=project)
    assert result.returncode == 1
    assert message in result.stderr
    assert tree(out) == {"local/keep.txt": b"mine"}


def test_rejects_a_broken_stack_module(project: Path) -> None:
    (project / "stacks" / "broken.py").write_text("STACK = 42\n")
    result = run("synth", "--out", str(project / "dist"), "--root", str(project), cwd=project)
    assert result.returncode == 1
    assert "stacks/broken.py must define STACK = Stack(...)" in result.stderr
    assert not (project / "dist").exists()
