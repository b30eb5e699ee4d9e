"""``kubetrain validate FILE...``: check job manifests against the typed API.

Exit 0 with a one-line summary per job when all are valid; exit 1 listing every error
with its field path otherwise (all files and documents are checked, not just the first).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubetrain.api import JobValidationError, apply_defaults, load_jobs_from_yaml
from kubetrain.api.loader import Job


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files (use - for stdin)")


def describe(job: Job) -> str:
    """One line: kind/name, replicas per type and the process count."""
    full = apply_defaults(job)
    parts = [f"{rtype} x{count}" for rtype, count in full.summary().items()]
    extra = ""
    if full.kind == "PyTorchJob":
        nproc = full.spec.nproc_per_node or "auto"
        extra = f", nprocPerNode {nproc}"
    elif full.kind == "MPIJob":
        slots = full.spec.slots_per_worker
        extra = f", {slots} slot(s) per worker"
    return f"{full.kind}/{full.name or '<generated>'}: {', '.join(parts)}{extra}"


def run(args: argparse.Namespace) -> int:
    failed = 0
    checked = 0
    for file in args.files:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text()
        except OSError as exc:
            print(f"{file}: cannot read: {exc.strerror}", file=sys.stderr)
            failed += 1
            continue
        try:
            results = list(load_jobs_from_yaml(text, file))
        except JobValidationError as exc:
            print(exc, file=sys.stderr)
            failed += 1
            continue
        if not results:
            print(f"{file}: no job documents found", file=sys.stderr)
            failed += 1
        for _, result in results:
            checked += 1
            if isinstance(result, JobValidationError):
                failed += 1
                print(result, file=sys.stderr)
            else:
                print(f"ok {file}: {describe(result)}")
    if failed:
        print(f"{failed} of {max(checked, failed)} document(s) invalid", file=sys.stderr)
        return 1
    return 0
