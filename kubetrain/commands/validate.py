"""``kubetrain validate FILE...``: check job manifests against the typed API.

Exit 0 with a one-line summary per job when all are valid; exit 1 listing every error
with its field path otherwise (all files and documents are checked, not just the first).
Whatever a file holds (not UTF-8, YAML nested too deep, an alias bomb, a huge key), the
answer is a message naming the file and the path, never a traceback. The replica limits
are the cluster's: give the ones its CRDs were generated with.
"""

from __future__ import annotations

import argparse
import sys

from kubetrain.api import JobValidationError, MPIJob, PyTorchJob, apply_defaults
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.loader import Job, load_jobs_from_yaml, read_manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files (use - for stdin)")
    parser.add_argument(
        "--max-replicas-per-type",
        type=int,
        default=DEFAULT_REPLICA_LIMITS.max_replicas_per_type,
        metavar="N",
        help="the cluster's limit on replicas of one replica type (default: %(default)s)",
    )
    parser.add_argument(
        "--max-pods-per-job",
        type=int,
        default=DEFAULT_REPLICA_LIMITS.max_pods_per_job,
        metavar="N",
        help="the cluster's limit on the pods of one job (default: %(default)s)",
    )


def describe(job: Job) -> str:
    """One line: kind/name, replicas per type and the process count."""
    full = apply_defaults(job)
    parts = [f"{rtype} x{count}" for rtype, count in full.summary().items()]
    extra = ""
    if isinstance(full, PyTorchJob):
        nproc = full.spec.nproc_per_node or "auto"
        extra = f", nprocPerNode {nproc}"
    elif isinstance(full, MPIJob):
        slots = full.spec.slots_per_worker
        extra = f", {slots} slot(s) per worker"
    name = full.name or f"{full.metadata.generate_name or ''}<generated>"
    return f"{full.kind}/{name}: {', '.join(parts)}{extra}"


def run(args: argparse.Namespace) -> int:
    try:
        limits = ReplicaLimits(
            max_replicas_per_type=args.max_replicas_per_type,
            max_pods_per_job=args.max_pods_per_job,
        )
    except ValueError as exc:
        print(f"kubetrain validate: {exc}", file=sys.stderr)
        return 2
    failed = 0
    checked = 0
    for file in args.files:
        try:
            text = read_manifest(file)
            results = list(load_jobs_from_yaml(text, file, limits=limits))
        except OSError as exc:
            print(f"{file}: cannot read: {exc.strerror}", file=sys.stderr)
            failed += 1
            continue
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
