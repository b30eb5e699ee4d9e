"""``kubetrain convert FILE... [--to v1|v2beta1|trainjob] [--runtime NAME] [-o DIR|-]``:
rewrite manifests of older Kubeflow versions (TFJob and PyTorchJob v1beta1/v1beta2,
MPIJob v1alpha1/v1alpha2/v1) in the versions kubetrain serves, or v1 jobs as TrainJobs.

Files are read as ``kubetrain validate`` reads them (multi-document YAML, the same
limits, a clean message naming the file and path for anything unreadable). Every
document gets a report on standard error: what was carried where, what has no
equivalent (by field path, with the value) and what the user should decide. Objects
already in a served version pass through unchanged. The output, every converted
document validated as ``kubetrain validate`` validates it, goes to standard output
(``-o -``, the default) or to one file per input file in DIR (``-o DIR``), never over an
input file and over an existing file only with ``--overwrite``. A file with a document
that cannot be converted writes nothing.

Exit 0 when everything was carried; 1 when a field was dropped or a document failed;
2 for a usage error (the output cannot be written where asked).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from kubetrain.api import JobValidationError
from kubetrain.api.convert import TARGETS, TRAINJOB, Conversion, NoteKind, convert
from kubetrain.api.loader import read_manifest
from kubetrain.api.reading import read_documents
from kubetrain.manifest import dump_all

STDOUT = "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files (use - for stdin)")
    parser.add_argument(
        "--to",
        choices=TARGETS,
        default=None,
        help="target: the kind's served version (v1 for TFJob and PyTorchJob, v2beta1 for "
        "MPIJob; the default) or trainjob (a Trainer v2 TrainJob)",
    )
    parser.add_argument(
        "--runtime", metavar="NAME", help="with --to trainjob: the runtime the TrainJob names"
    )
    parser.add_argument(
        "-o",
        "--output",
        default=STDOUT,
        metavar="DIR|-",
        help="- (default): the converted YAML to stdout; DIR: one file per input file",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="with -o DIR: replace files already there (never an input file)",
    )


def report(conv: Conversion) -> str:
    """The block printed for one document: a heading, then one line per note."""
    meta = conv.output.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    what = f"{conv.output.get('kind')}/{name or '<generated>'} {conv.output.get('apiVersion')}"
    dropped = sum(1 for n in conv.notes if n.kind is NoteKind.DROPPED)
    state = f"{dropped} field(s) not carried" if dropped else "everything carried"
    lines = [f"{conv.source}: {what}: {state}"]
    lines += [f"  {note.line()}" for note in conv.notes]
    return "\n".join(lines)


def _destinations(args: argparse.Namespace) -> dict[str, Path] | str:
    """Where each input file's output goes (-o DIR), or why it cannot be written."""
    directory = Path(args.output)
    if directory.exists() and not directory.is_dir():
        return f"-o {args.output}: not a directory"
    if STDOUT in args.files:
        return "-o DIR needs named files: standard input has no file name to write"
    out: dict[str, Path] = {}
    for file in args.files:
        dest = directory / Path(file).name
        if dest in out.values():
            return f"{file}: another input file has the same name, {dest} would hold both"
        if dest.exists() and Path(file).exists() and os.path.samefile(dest, file):
            return f"{file}: {dest} is the input file itself: choose another -o DIR"
        if dest.exists() and not args.overwrite:
            return f"{dest}: already exists: remove it or pass --overwrite"
        out[file] = dest
    return out


def _convert_file(file: str, args: argparse.Namespace) -> tuple[list[dict[str, Any]] | None, bool]:
    """(the file's converted documents, or None when one failed; whether all carried)."""
    try:
        documents = list(read_documents(read_manifest(file), file))
    except OSError as exc:
        print(f"{file}: cannot read: {exc.strerror}", file=sys.stderr)
        return None, False
    except JobValidationError as exc:
        print(exc, file=sys.stderr)
        return None, False
    if not documents:
        print(f"{file}: no documents found", file=sys.stderr)
        return None, False
    outputs: list[dict[str, Any]] = []
    ok = complete = True
    for index, document in enumerate(documents):
        label = f"{file} document {index + 1}"
        try:
            if isinstance(document, JobValidationError):
                raise document
            conv = convert(document, to=args.to, runtime=args.runtime, source=label)
        except JobValidationError as exc:
            print(exc, file=sys.stderr)
            ok = False
            continue
        print(report(conv), file=sys.stderr)
        complete = complete and conv.complete
        outputs.append(conv.output)
    return (outputs if ok else None), ok and complete


def run(args: argparse.Namespace) -> int:
    if args.runtime is not None and args.to != TRAINJOB:
        print("kubetrain convert: --runtime applies only with --to trainjob", file=sys.stderr)
        return 2
    destinations: dict[str, Path] | str = {}
    if args.output != STDOUT:
        destinations = _destinations(args)
        if isinstance(destinations, str):
            print(f"kubetrain convert: {destinations}", file=sys.stderr)
            return 2
    failed = 0
    stream: list[dict[str, Any]] = []
    for file in args.files:
        outputs, complete = _convert_file(file, args)
        failed += 0 if complete else 1
        if outputs is None:
            continue
        if args.output == STDOUT:
            stream.extend(outputs)
            continue
        assert isinstance(destinations, dict)
        dest = destinations[file]
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "w" if args.overwrite else "x", encoding="utf-8") as handle:
            handle.write(dump_all(outputs))
        print(f"{file}: written to {dest}", file=sys.stderr)
    if stream:
        sys.stdout.write(dump_all(stream))
    if failed:
        print(f"{failed} of {len(args.files)} file(s) not fully converted", file=sys.stderr)
        return 1
    return 0
