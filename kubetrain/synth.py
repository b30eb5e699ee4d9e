"""Synthesis entry points shared by ``kubetrain synth``, ``python -m stacks`` and tests."""

from __future__ import annotations

from pathlib import Path

from kubetrain.gitops.render import RenderedChart, render_charts
from kubetrain.gitops.stack import Stack, load_stacks

__all__ = ["RenderedChart", "Stack", "load_stacks", "render_stack"]


def render_stack(name: str = "local", root: Path | None = None) -> list[RenderedChart]:
    """Render every chart of the stack ``name`` (from ``stacks/``), in chart order."""
    stacks = load_stacks(root=root)
    if name not in stacks:
        raise ValueError(
            f"stack {name!r} does not exist: choose one of {', '.join(sorted(stacks))}"
        )
    return render_charts(stacks[name])
