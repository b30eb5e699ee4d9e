"""``kubetrain synth`` writes the stack's charts in order, deterministically and atomically."""

from __future__ import annotations

from pathlib import Path

import yaml

from kubetrain import __version__
from kubetrain.api import generate_crds
from kubetrain.cli import main
from kubetrain.synth import render_stack


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_render_local_stack_starts_with_the_crds() -> None:
    charts = render_stack("local")
    assert charts[0].name == "crds"
    assert charts[0].objects == generate_crds()


def test_synth_writes_crds_chart(tmp_path: Path) -> None:
    assert main(["synth", "--out", str(tmp_path)]) == 0
    chart_dir = tmp_path / "local" / __version__ / "00-crds"
    files = sorted(p.name for p in chart_dir.iterdir())
    assert files == [
        "0000-customresourcedefinition-pytorchjobs.kubeflow.org.yaml",
        "0001-customresourcedefinition-tfjobs.kubeflow.org.yaml",
        "0002-customresourcedefinition-mpijobs.kubeflow.org.yaml",
    ]
    first = yaml.safe_load((chart_dir / files[0]).read_text())
    assert first == generate_crds()[0]


def test_synth_is_byte_identical_across_runs(tmp_path: Path) -> None:
    assert main(["synth", "--out", str(tmp_path / "a")]) == 0
    assert main(["synth", "--out", str(tmp_path / "b")]) == 0
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_rejects_unknown_stack(tmp_path: Path) -> None:
    assert main(["synth", "nope", "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())
