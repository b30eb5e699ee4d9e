"""``kubetrain synth [STACK...]``: render stacks into ``dist/<stack>/<version>/``.

Each stack lives in ``stacks/<name>.py``. A version is immutable: when the rendered
content of an existing version changed, synth fails listing the changed objects, and
``--bump patch|minor|major`` writes the next version (and updates the stack file).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from kubetrain.gitops.bump import bump_stack_file, stack_file
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.semver import Bump
from kubetrain.gitops.stack import Stack, load_stacks
from kubetrain.gitops.writer import VersionConflict, WriteResult, write_version


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stacks", nargs="*", help="stacks to render (default: all in stacks/)")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="output dir (default: dist)")
    parser.add_argument(
        "--bump",
        choices=[b.value for b in Bump],
        help="write the next version when the current one's content changed",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path.cwd(),
        help="directory holding the stacks/ package (default: .)",
    )


def _summary(result: WriteResult, stack: Stack) -> str:
    counts = ", ".join(f"{c.name} {len(c.objects)}" for c in result.charts)
    total = sum(len(c.objects) for c in result.charts)
    state = "unchanged" if result.unchanged else "written"
    return f"{stack.name} {result.version}: {total} objects ({counts}) -> {result.path} [{state}]"


def synth_stack(stack: Stack, out: Path, bump: Bump | None) -> WriteResult:
    charts = render_charts(stack)
    try:
        return write_version(stack, charts, out)
    except VersionConflict:
        if bump is None:
            raise
    new_version = bump_stack_file(stack_file(stack), stack.version, bump)
    bumped = dataclasses.replace(stack, version=new_version)
    return write_version(bumped, render_charts(bumped), out)


def run(args: argparse.Namespace) -> int:
    try:
        stacks = load_stacks(root=args.root)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    names = args.stacks or sorted(stacks)
    unknown = [n for n in names if n not in stacks]
    if unknown:
        print(
            f"error: unknown stack(s) {', '.join(unknown)}: "
            f"choose from {', '.join(sorted(stacks))}",
            file=sys.stderr,
        )
        return 2
    bump = Bump(args.bump) if args.bump else None
    failed = 0
    for name in names:
        try:
            result = synth_stack(stacks[name], args.out, bump)
        except VersionConflict as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        except ValueError as exc:
            print(f"error: stack {name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(_summary(result, result_stack(stacks[name], result)))
    return 1 if failed else 0


def result_stack(stack: Stack, result: WriteResult) -> Stack:
    return (
        stack
        if result.version == stack.version
        else dataclasses.replace(stack, version=result.version)
    )
