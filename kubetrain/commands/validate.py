"""``kubetrain validate FILE...``: check manifests of every kind kubetrain serves (the
Kubeflow v1 jobs, and Trainer v2's TrainJob, TrainingRuntime and ClusterTrainingRuntime)
against the typed API.

Exit 0 with a one-line summary per job when all are valid; exit 1 listing every error
with its field path otherwise (all files and documents are checked, not just the first).
A Trainer object's line also notes what would stop the Kubeflow SDK from using it.
Whatever a file holds (not UTF-8, YAML nested too deep, an alias bomb, a huge key), the
answer is a message naming the file and the path, never a traceback. The replica limits
are the cluster's: give the ones its CRDs were generated with.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from kubetrain.api import JobValidationError, MPIJob, PyTorchJob, apply_defaults
from kubetrain.api.keys import TRAINER_FRAMEWORK_LABEL
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.loader import Job, read_manifest
from kubetrain.api.older_versions import CONVERT_COMMAND
from kubetrain.api.trainer.loader import KubetrainObject, TrainerObject, load_objects_from_yaml
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.sdk import runtime_notes, trainjob_notes
from kubetrain.api.trainer.trainjob import TrainJob


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


def describe_trainer(obj: TrainerObject) -> str:
    """One line: kind/name, what it runs, and notes on what the Kubeflow SDK would need."""
    if isinstance(obj, TrainJob):
        ref = obj.spec.runtime_ref
        trainer = obj.spec.trainer
        nodes = trainer.num_nodes if trainer and trainer.num_nodes else None
        parts = [
            f"{ref.kind or 'ClusterTrainingRuntime'}/{ref.name}",
            f"{nodes} node(s)" if nodes else "the runtime's node count",
        ]
        if obj.spec.suspend:
            parts.append("suspended")
        notes = trainjob_notes(obj)
        name = obj.name or f"{obj.metadata.generate_name or ''}<generated>"
    else:
        assert isinstance(obj, RuntimeBase)
        policy = obj.spec.ml_policy
        framework = (obj.metadata.labels or {}).get(TRAINER_FRAMEWORK_LABEL)
        nodes = policy.num_nodes if policy and policy.num_nodes else 1
        parts = [
            f"framework {framework or '(no label)'}",
            f"mlPolicy {(policy.framework() if policy else None) or 'plain'}",
            f"{nodes} node(s)",
            "replicatedJobs " + ", ".join(r.name for r in obj.replicated_jobs()),
        ]
        notes = runtime_notes(obj)
        name = obj.name
    line = f"{obj.kind}/{name}: {', '.join(parts)}"
    return line + "".join(f"; note: {note}" for note in notes)


def describe_object(obj: KubetrainObject) -> str:
    """One line for any kind kubetrain serves."""
    if isinstance(obj, TrainJob | RuntimeBase):
        return describe_trainer(obj)
    return describe(obj)


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
            results = list(load_objects_from_yaml(text, file, limits=limits))
        except OSError as exc:
            print(f"{file}: cannot read: {exc.strerror}", file=sys.stderr)
            failed += 1
            continue
        except JobValidationError as exc:
            print(exc, file=sys.stderr)
            failed += 1
            continue
        if not results:
            print(f"{file}: no documents found", file=sys.stderr)
            failed += 1
        for _, result in results:
            checked += 1
            if isinstance(result, JobValidationError):
                failed += 1
                # An older apiVersion's refusal names the command that converts this file.
                command = f"kubetrain convert {shlex.quote(file)}"
                print(str(result).replace(CONVERT_COMMAND, command), file=sys.stderr)
            else:
                print(f"ok {file}: {describe_object(result)}")
    if failed:
        print(f"{failed} of {max(checked, failed)} document(s) invalid", file=sys.stderr)
        return 1
    return 0
