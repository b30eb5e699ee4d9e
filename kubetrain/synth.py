"""Synthesis: stacks of charts rendered to ordered, deterministic manifests in ``dist/``.

``render_stack`` gives the objects of each chart in deployment order (CRDs first);
``write_stack`` writes them as ``dist/<stack>/<version>/<NN>-<chart>/<NNNN>-<kind>-<name>.yaml``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain import __version__
from kubetrain._jsii import quiet_jsii
from kubetrain.manifest import dump


@dataclass(frozen=True)
class RenderedChart:
    name: str
    objects: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class StackDefinition:
    name: str
    version: str
    charts: tuple[str, ...]


def _local_stack() -> StackDefinition:
    return StackDefinition(name="local", version=__version__, charts=("crds",))


STACKS: dict[str, Callable[[], StackDefinition]] = {"local": _local_stack}


def _chart_builders() -> dict[str, Callable[[Any], Any]]:
    from kubetrain.charts import CrdsChart

    return {"crds": lambda app: CrdsChart(app, "crds")}


def render_stack(name: str = "local") -> list[RenderedChart]:
    """Render every chart of the stack ``name`` (in chart order) to plain dicts."""
    if name not in STACKS:
        raise ValueError(
            f"stack {name!r} does not exist: choose one of {', '.join(sorted(STACKS))}"
        )
    quiet_jsii()
    import cdk8s

    definition = STACKS[name]()
    builders = _chart_builders()
    app = cdk8s.App()
    charts = [(chart_name, builders[chart_name](app)) for chart_name in definition.charts]
    return [RenderedChart(chart_name, list(chart.to_json())) for chart_name, chart in charts]


def _file_name(index: int, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{index:04d}-{obj['kind'].lower()}-{meta.get('name', 'unnamed')}.yaml"


def write_stack(name: str, out_dir: Path) -> tuple[Path, list[RenderedChart]]:
    """Write the stack under ``out_dir/<name>/<version>/`` atomically (all or nothing)."""
    definition = STACKS[name]() if name in STACKS else None
    charts = render_stack(name)
    assert definition is not None
    target = out_dir / name / definition.version
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{definition.version}-", dir=target.parent))
    try:
        for chart_index, chart in enumerate(charts):
            chart_dir = staging / f"{chart_index:02d}-{chart.name}"
            chart_dir.mkdir()
            for index, obj in enumerate(chart.objects):
                (chart_dir / _file_name(index, obj)).write_text(dump(obj))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target, charts
