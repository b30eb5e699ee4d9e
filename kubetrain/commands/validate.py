"""``kubetrain validate FILE...``: check manifests of every kind kubetrain serves (the
Kubeflow v1 jobs, and Trainer v2's TrainJob, TrainingRuntime and ClusterTrainingRuntime)
against the typed API.

Exit 0 with a one-line summary per job when all are valid; exit 1 listing every error
with its field path otherwise (all files and documents are checked, not just the first).
A Trainer object's line also notes what would stop the Kubeflow SDK from using it.
A TrainJob whose runtime is among the files (any of them, before or after it) is also
checked with that runtime, as upstream's webhook checks it at submission and the operator
before it makes anything (:func:`kubetrain.frameworks.registry.resolve_trainjob`): one its
runtime makes invalid is refused, the runtime named in the message. A TrainJob whose
runtime is not given is checked on its own (its runtime may be on the cluster).
Whatever a file holds (not UTF-8, YAML nested too deep, an alias bomb, a huge key), the
answer is a message naming the file and the path, never a traceback. The replica limits
are the cluster's: give the ones its CRDs were generated with.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from kubetrain.api import JobValidationError, MPIJob, PyTorchJob, apply_defaults
from kubetrain.api.keys import TRAINER_FRAMEWORK_LABEL
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.loader import Job, read_manifest
from kubetrain.api.older_versions import CONVERT_COMMAND
from kubetrain.api.reading import document_label
from kubetrain.api.trainer.defaults import apply_trainer_defaults
from kubetrain.api.trainer.elastic import runtime_nodes
from kubetrain.api.trainer.loader import KubetrainObject, TrainerObject, load_objects_from_yaml
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.sdk import runtime_notes, trainjob_notes
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.commands.runtime_lookup import runtime_among
from kubetrain.frameworks import pytorch
from kubetrain.frameworks.registry import resolve_trainjob

#: A file's documents as loaded: (document index, object or its errors).
Documents = list[tuple[int, KubetrainObject | JobValidationError]]


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
        # The value the operator gives the pods (the deprecated elastic field included).
        extra = f", nprocPerNode {pytorch.nproc_per_node(full)}"
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
        nodes = runtime_nodes(policy)  # what its TrainJobs start with when they set none
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


def runtime_refusal(
    job: TrainJob, runtimes: Sequence[RuntimeBase], label: str
) -> JobValidationError | None:
    """What makes ``job`` invalid with the runtime it names, labelled ``label``; None when
    the pair is valid or that runtime is not among ``runtimes``."""
    runtime = runtime_among(job, runtimes)
    if runtime is None:
        return None
    try:
        resolve_trainjob(apply_trainer_defaults(job), apply_trainer_defaults(runtime))
    except JobValidationError as error:
        return JobValidationError(error.errors, label)
    return None


def _read(file: str, limits: ReplicaLimits) -> Documents | str:
    """The documents of ``file`` as loaded, or why it cannot be read at all."""
    try:
        results = list(load_objects_from_yaml(read_manifest(file), file, limits=limits))
    except OSError as exc:
        return f"{file}: cannot read: {exc.strerror}"
    except JobValidationError as exc:
        return str(exc)
    return results or f"{file}: no documents found"


def run(args: argparse.Namespace) -> int:
    try:
        limits = ReplicaLimits(
            max_replicas_per_type=args.max_replicas_per_type,
            max_pods_per_job=args.max_pods_per_job,
        )
    except ValueError as exc:
        print(f"kubetrain validate: {exc}", file=sys.stderr)
        return 2
    read = [(file, _read(file, limits)) for file in args.files]
    runtimes = [
        obj
        for _, results in read
        if not isinstance(results, str)
        for _, obj in results
        if isinstance(obj, RuntimeBase)
    ]
    failed = 0
    checked = 0
    for file, results in read:
        if isinstance(results, str):
            print(results, file=sys.stderr)
            failed += 1
            continue
        for index, result in results:
            checked += 1
            if isinstance(result, TrainJob):
                result = runtime_refusal(result, runtimes, document_label(file, index)) or result
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
