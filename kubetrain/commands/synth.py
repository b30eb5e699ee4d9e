"""``kubetrain synth [STACK]``: synthesize a stack into ``dist/<stack>/<version>/``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubetrain.synth import STACKS, write_stack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stacks", nargs="*", default=["local"], help="stacks (default: local)")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="output dir (default: dist)")


def run(args: argparse.Namespace) -> int:
    unknown = [s for s in args.stacks if s not in STACKS]
    if unknown:
        print(
            f"unknown stack(s) {', '.join(unknown)}: choose from {', '.join(sorted(STACKS))}",
            file=sys.stderr,
        )
        return 2
    for name in args.stacks:
        target, charts = write_stack(name, args.out)
        counts = ", ".join(f"{c.name} {len(c.objects)}" for c in charts)
        print(f"{name}: {sum(len(c.objects) for c in charts)} objects ({counts}) -> {target}")
    return 0
