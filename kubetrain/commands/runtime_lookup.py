"""Finding the runtime a TrainJob names, for ``kubetrain run --local`` (and, among the
files given, for ``kubetrain validate``).

The runtime named by ``spec.runtimeRef`` is looked for, in order, among the other
documents of the TrainJob's file, in the ``--runtime`` files, then among the objects a
stack renders (``--stack NAME``): the version written under ``dist/<stack>/<version>/``
when there is one for the stack's current version, else the stack rendered now.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kubetrain.api.errors import JobValidationError
from kubetrain.api.loader import read_manifest
from kubetrain.api.reading import read_documents
from kubetrain.api.trainer import TrainJob, load_trainer_object
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.local.plan import LocalRunError
from kubetrain.local.trainjob import runtime_matches

#: Objects of a rendered stack that are runtimes.
RUNTIME_KINDS = frozenset(T.RUNTIME_KINDS)


def runtimes_in(path: str | Path) -> list[RuntimeBase]:
    """The TrainingRuntimes and ClusterTrainingRuntimes of a YAML file (documents of other
    kinds are passed over); JobValidationError for a runtime that is not valid or a file
    that cannot be read as YAML."""
    documents = []
    for document in read_documents(read_manifest(path), str(path)):
        if isinstance(document, JobValidationError):
            raise document
        documents.append(document)
    return _runtimes_among(documents, str(path))


def stack_runtimes(name: str, *, dist: Path, root: Path) -> tuple[list[RuntimeBase], str]:
    """The runtimes stack ``name`` renders, and where they were read (the written version
    or a fresh render); LocalRunError for an unknown stack."""
    # The generator is imported only when a stack is asked for (it starts cdk8s's jsii).
    from kubetrain.gitops.render import render_charts
    from kubetrain.gitops.stack import load_stacks

    try:
        stacks = load_stacks(root=root)
    except ValueError as error:
        raise LocalRunError(f"--stack {name}: {error}") from None
    stack = stacks.get(name)
    if stack is None:
        raise LocalRunError(
            f"--stack {name}: no such stack; choose one of {', '.join(sorted(stacks))}"
        )
    written = dist / stack.name / stack.version
    if written.is_dir():
        paths = sorted(
            p
            for p in written.rglob("*.yaml")
            if "argocd" not in p.relative_to(written).parts and p.name != "kustomization.yaml"
        )
        found = [runtime for path in paths for runtime in runtimes_in(path)]
        return found, f"stack {name} {stack.version} as written in {written}"
    objects = [obj for chart in render_charts(stack) for obj in chart.objects]
    return _runtimes_among(objects, f"stack {name}"), (
        f"stack {name} {stack.version} rendered now ({written} does not exist)"
    )


def _runtimes_among(objects: Sequence[Any], source: str) -> list[RuntimeBase]:
    """The runtimes among ``objects`` (other kinds are passed over), loaded as strictly as
    ``kubetrain validate`` loads them."""
    found: list[RuntimeBase] = []
    for index, obj in enumerate(objects):
        if not isinstance(obj, dict) or obj.get("kind") not in RUNTIME_KINDS:
            continue
        loaded = load_trainer_object(obj, f"{source} document {index + 1}")
        if isinstance(loaded, RuntimeBase):
            found.append(loaded)
    return found


def runtime_among(job: TrainJob, runtimes: Iterable[RuntimeBase]) -> RuntimeBase | None:
    """The first of ``runtimes`` that ``job``'s ``runtimeRef`` names (None: not among them)."""
    return next((runtime for runtime in runtimes if runtime_matches(job, runtime)), None)


def find_runtime(
    job: TrainJob,
    *,
    beside: Sequence[RuntimeBase],
    manifest: str,
    runtime_files: Sequence[str],
    stack: str | None,
    dist: Path,
    root: Path,
) -> tuple[RuntimeBase, str]:
    """The runtime ``job`` names and where it was found (see the module docs)."""
    searched: list[tuple[str, list[RuntimeBase]]] = [(manifest, list(beside))]
    for path in runtime_files:
        try:
            searched.append((path, runtimes_in(path)))
        except OSError as error:
            raise LocalRunError(f"--runtime {path}: cannot read it: {error.strerror}") from None
    if stack is not None:
        found, where = stack_runtimes(stack, dist=dist, root=root)
        searched.append((where, found))
    for where, runtimes in searched:
        named = runtime_among(job, runtimes)
        if named is not None:
            return named, where
    ref = job.spec.runtime_ref
    listing = "; ".join(
        f"{where}: {', '.join(f'{r.kind} {r.name}' for r in runtimes) or 'no runtime'}"
        for where, runtimes in searched
    )
    hint = "" if runtime_files or stack else " (pass --runtime RUNTIME.yaml or --stack NAME)"
    raise LocalRunError(
        f"TrainJob/{job.name} names {ref.kind or T.DEFAULT_RUNTIME_KIND} {ref.name}, which "
        f"is not among the runtimes given{hint}: {listing}"
    )
