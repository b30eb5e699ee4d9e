"""``kubetrain helm STACK``: export a stack as the Helm chart ``charts/kubetrain/``.

The chart comes from the constructs ``kubetrain synth`` renders (see
:mod:`kubetrain.gitops.helm`); ``--check`` fails when the written chart is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubetrain.gitops.helm import CHART_NAME, stale_files, write_chart
from kubetrain.gitops.stack import load_stacks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="the stack to export (a name from stacks/)")
    parser.add_argument(
        "--out", type=Path, default=Path("charts"), help="charts folder (default: charts)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the chart in --out differs from a fresh export",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path.cwd(),
        help="directory holding the stacks/ package (default: .)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        stacks = load_stacks(root=args.root)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stack = stacks.get(args.stack)
    if stack is None:
        print(
            f"error: unknown stack {args.stack!r}: choose from {', '.join(sorted(stacks))}",
            file=sys.stderr,
        )
        return 2
    try:
        if args.check:
            stale = stale_files(stack, args.out / CHART_NAME)
            for path in stale:
                print(f"stale: {args.out / CHART_NAME / path}", file=sys.stderr)
            if stale:
                print(f"run `kubetrain helm {stack.name}` to regenerate", file=sys.stderr)
            return 1 if stale else 0
        written = write_chart(stack, args.out)
    except ValueError as exc:
        print(f"error: stack {stack.name}: {exc}", file=sys.stderr)
        return 1
    print(f"{stack.name} {stack.version}: Helm chart {CHART_NAME}-{stack.version} -> {written}")
    return 0
