"""Converting older Kubeflow manifests, and v1 jobs to TrainJobs, onto what kubetrain serves.

:func:`convert` takes one object's wire form: an older version of a job kind
(``kubetrain.api.older_versions``) is rewritten to the served version
(``versions_tf_pytorch``, ``versions_mpi``), an object already in a served version passes
through unchanged, and ``to="trainjob"`` goes on to a Trainer v2 TrainJob. The result
is validated as ``kubetrain validate`` validates; a field unknown to the served version
(and so to the old one, whose API server kept it and whose operator ignored it) is
dropped with a note. The :class:`Conversion` says, per field, what was carried, what was
dropped (``complete`` is then false) and what the user should decide.
"""

from __future__ import annotations

import re
from typing import Any

from kubetrain.api.convert.report import Conversion, Note, NoteKind
from kubetrain.api.convert.versions import convert_version
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.kinds import KINDS, TRAINER_KIND_INFOS
from kubetrain.api.older_versions import OLDER_VERSIONS, older_version
from kubetrain.api.wire import wire_copy

#: What ``to`` may name: a job kind's served version, or a TrainJob.
TRAINJOB = "trainjob"
TARGETS = (*sorted({info.version for info in KINDS.values()}), TRAINJOB)

__all__ = ["TARGETS", "Conversion", "Note", "NoteKind", "convert"]


def convert(
    obj: Any, *, to: str | None = None, runtime: str | None = None, source: str = ""
) -> Conversion:
    """``obj`` in the version kubetrain serves (``to``: that version, the default, or
    ``"trainjob"``; ``runtime`` names the TrainJob's runtime). Raises
    :class:`JobValidationError` when the object cannot be converted or the result is not
    valid, and ValueError for a ``to`` or ``runtime`` that cannot apply to any object."""
    if to is not None and to not in TARGETS:
        raise ValueError(f"to ({to!r}) must be one of: {', '.join(TARGETS)}")
    if runtime is not None and to != TRAINJOB:
        raise ValueError(f"runtime ({runtime!r}) applies only with to={TRAINJOB!r}")
    # Imported here: the loader imports this package's table for its hint.
    from kubetrain.api.trainer.loader import load_object

    wire, shape_errors = wire_copy(obj)
    if shape_errors:
        raise JobValidationError(shape_errors, source)
    if not isinstance(wire, dict):
        expected = "a mapping with apiVersion, kind, metadata and spec"
        raise JobValidationError([FieldError("", expected, wire)], source)
    kind, api_version = wire.get("kind"), wire.get("apiVersion")
    kinds = (*KINDS, *TRAINER_KIND_INFOS)
    if not isinstance(kind, str) or kind not in kinds:
        error = (
            FieldError("kind", f"one of: {', '.join(kinds)}", kind="required")
            if kind is None
            else FieldError("kind", f"must be one of: {', '.join(kinds)}", kind)
        )
        raise JobValidationError([error], source)
    info = KINDS.get(kind) or TRAINER_KIND_INFOS[kind]
    if to is not None and to not in (info.version, TRAINJOB):
        expected = f"a {kind} converts to {info.version} (its served version) or {TRAINJOB}"
        raise JobValidationError([FieldError("kind", expected, f"to {to}")], source)
    if api_version == info.api_version:
        conv = Conversion(output=wire, source=source)
        conv.carried(
            "apiVersion", "apiVersion", "already the served version: unchanged", api_version
        )
        load_object(wire, source)
    else:
        version = older_version(kind, api_version)
        if version is None:
            older = [f"{info.group}/{v}" for v in OLDER_VERSIONS.get(kind, {})]
            expected = info.api_version
            if older:
                expected += f", or an older version kubetrain converts: {', '.join(older)}"
            raise JobValidationError(
                [FieldError("apiVersion", f"must be {expected}", api_version)], source
            )
        conv = convert_version(wire, kind, version, source)
        _drop_unknown_fields(conv, f"{info.group}/{version}", load_object)
    if to == TRAINJOB and kind in KINDS:
        conv = _to_trainjob(conv, runtime, load_object)
    return conv


def _to_trainjob(conv: Conversion, runtime: str | None, load_object: Any) -> Conversion:
    try:
        from kubetrain.api.convert.trainjob import to_trainjob
    except ModuleNotFoundError as exc:
        if exc.name != "kubetrain.api.convert.trainjob":
            raise
        expected = "a kind kubetrain can convert to a TrainJob: this build has no converter"
        raise JobValidationError(
            [FieldError("kind", expected, conv.output.get("kind"))], conv.source
        ) from None
    notes = list(conv.notes)
    for path in sorted(conv.written_defaults):
        # An older version's default the user never wrote: a TrainJob has no run policy
        # to hold it, and nothing of the user's is lost.
        if _pop(conv.output, path) is not _ABSENT:
            notes = [n for n in notes if n.target != path]
    result: Conversion = to_trainjob(conv.output, runtime=runtime, source=conv.source)
    load_object(result.output, conv.source)
    return Conversion(output=result.output, source=conv.source, notes=[*notes, *result.notes])


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_ABSENT = object()


def _pop(obj: Any, path: str) -> Any:
    """Remove the value at a wire path (``a.b[0].c``); ``_ABSENT`` when there is none."""
    parts: list[str | int] = [int(index) if index else name for name, index in _PART.findall(path)]
    for part in parts[:-1]:
        found = isinstance(obj, list) and isinstance(part, int) and part < len(obj)
        if not (found or (isinstance(obj, dict) and part in obj)):
            return _ABSENT
        obj = obj[part]
    last = parts[-1] if parts else None
    if isinstance(last, str) and isinstance(obj, dict) and last in obj:
        return obj.pop(last)
    return _ABSENT


def _drop_unknown_fields(conv: Conversion, old: str, load_object: Any) -> None:
    """Validate the output; drop (with a note) the fields neither version defines. A
    converter carries pod templates and policies as they were, so a field unknown to
    the served version was unknown to the old one too: its operator never read it."""
    try:
        load_object(conv.output, conv.source)
        return
    except JobValidationError as exc:
        unknown = [e for e in exc.errors if e.kind == "unknown"]
        if not unknown:
            raise
        for error in unknown:
            value = _pop(conv.output, error.path)
            if value is _ABSENT:
                raise
            conv.dropped(
                error.path,
                value,
                f"unknown to {old} too (its API server kept it, its operator ignored it): "
                f"{error.expected}",
            )
    load_object(conv.output, conv.source)
