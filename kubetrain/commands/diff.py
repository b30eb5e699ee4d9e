"""``kubetrain diff STACK V1 V2``: object-level diff between two synthesized versions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubetrain.gitops.diff import diff_objects, format_diff, load_version


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack")
    parser.add_argument("old", metavar="V1", help="older version")
    parser.add_argument("new", metavar="V2", help="newer version")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="dist dir (default: dist)")


def run(args: argparse.Namespace) -> int:
    try:
        old = load_version(args.out / args.stack / args.old)
        new = load_version(args.out / args.stack / args.new)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    diff = diff_objects(old, new)
    sys.stdout.write(format_diff(diff))
    return 0 if diff.empty else 1
