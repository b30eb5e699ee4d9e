"""Parsing jobs from dicts and YAML, reporting every problem at once with its path.

Whatever it is given, :func:`load_job` returns a job or raises :class:`JobValidationError`
naming each problem's path, in bounded time and memory: the input is first copied into
the shape the API server would hold (``kubetrain.api.reading``: limits on depth and size,
then the explicit nulls the server prunes dropped), then checked by the typed models
(camelCase wire names only), the embedded Kubernetes schemas (``kubetrain.api.embedded``),
the metadata rules (``kubetrain.api.meta``) and the cross-field invariants the CRDs also
enforce (``kubetrain.api.invariants``). A job that loads reloads from its ``to_wire()``.
The steps and the error paths are the Trainer kinds' too (``kubetrain.api.loading``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubetrain.api.common import JobBase
from kubetrain.api.embedded import status_is_ignored, without_status
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.invariants import invariants_for
from kubetrain.api.job_crds import JOB_CRD_INFOS
from kubetrain.api.kinds import (
    CASE_INSENSITIVE_KINDS,
    KINDS,
    REPLICA_FIELDS,
    REPLICA_TYPES,
    V1_KINDS,
)
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, MAX_FILE_BYTES, ReplicaLimits
from kubetrain.api.loading import load_documents, load_typed, read_kind, the_one
from kubetrain.api.older_versions import older_version_hint
from kubetrain.api.reading import decode_text
from kubetrain.api.rules import run_rules

#: A loaded job of any v1 kind (its model is the kind's, :data:`JOB_TYPES`).
Job = JobBase
JOB_TYPES: dict[str, type[JobBase]] = {k.info.kind: k.model for k in V1_KINDS}
API_VERSIONS = {kind: info.api_version for kind, info in KINDS.items()}


def load_job(obj: Any, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> Job:
    """Parse one job from its wire form; raise :class:`JobValidationError` listing all errors.

    ``limits`` are the cluster's replica limits (the ones its CRDs were generated with).
    A status that cannot be read is dropped (:func:`status_is_ignored`), as the server does.
    """
    wire, kind, model = read_kind(obj, source, JOB_TYPES, JOB_CRD_INFOS)
    errors: list[FieldError] = []
    api_version = wire.get("apiVersion")
    if api_version != API_VERSIONS[kind]:
        if api_version is None:
            errors.append(
                FieldError("apiVersion", f"{API_VERSIONS[kind]} for a {kind}", kind="required")
            )
        else:
            expected = f"must be {API_VERSIONS[kind]} for a {kind}"
            hint = older_version_hint(kind, api_version)
            errors.append(FieldError("apiVersion", expected + hint, api_version))
    wire, renamed = normalise_replica_types(kind, wire)
    job, typed_errors = load_typed(model, kind, wire)
    errors.extend(typed_errors)
    errors.extend(run_rules(invariants_for(kind, limits), wire))
    if status_is_ignored(wire, errors):
        return load_job(without_status(wire), source, limits=limits)
    if errors or job is None:
        raise JobValidationError([_as_written(e, kind, renamed) for e in errors], source)
    assert isinstance(job, JOB_TYPES[kind])
    return job


def normalise_replica_types(
    kind: str, wire: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Replica types of a case-insensitive kind (TFJob) in their canonical spelling
    (``worker`` -> ``Worker``), as upstream's defaulter does; returns the job and what was
    renamed (canonical -> as written). Nothing is renamed when two keys differ only in
    letter case: that job is refused (``tf-replica-types-distinct``)."""
    if kind not in CASE_INSENSITIVE_KINDS:
        return wire, {}
    spec = wire.get("spec")
    field = REPLICA_FIELDS[kind]
    specs = spec.get(field) if isinstance(spec, dict) else None
    if not isinstance(specs, dict):
        return wire, {}
    folded = [key.lower() for key in specs]
    if len(set(folded)) != len(folded):
        return wire, {}
    canonical = {name.lower(): name for name in REPLICA_TYPES[kind]}
    renamed = {
        canonical[key.lower()]: key
        for key in specs
        if key.lower() in canonical and key != canonical[key.lower()]
    }
    if not renamed:
        return wire, {}
    written = {value: name for name, value in renamed.items()}
    new_specs = {written.get(key, key): value for key, value in specs.items()}
    assert isinstance(spec, dict)
    return {**wire, "spec": {**spec, field: new_specs}}, renamed


def _as_written(error: FieldError, kind: str, renamed: dict[str, str]) -> FieldError:
    """``error`` with a renamed replica type in its path spelled as the user wrote it."""
    head = f"spec.{REPLICA_FIELDS[kind]}."
    for canonical, original in renamed.items():
        prefix = head + canonical
        if error.path == prefix or error.path.startswith((prefix + ".", prefix + "[")):
            path = head + original + error.path[len(prefix) :]
            return FieldError(path, error.expected, error.value, error.kind)
    return error


def load_jobs_from_yaml(
    text: str, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> Iterator[tuple[int, Job | JobValidationError]]:
    """Parse every YAML document; yields (document index, job or its errors), raising
    :class:`JobValidationError` first when one cannot be read at all (:func:`load_documents`)."""
    return load_documents(text, source, lambda doc, label: load_job(doc, label, limits=limits))


def read_manifest(path: str | Path) -> str:
    """The text of a manifest file (``-`` is standard input): at most ``MAX_FILE_BYTES`` of
    UTF-8, else :class:`JobValidationError`; :class:`OSError` when it cannot be read."""
    if str(path) == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        return decode_text(data, "-", size=len(data))
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(MAX_FILE_BYTES + 1)
    return decode_text(data, str(path), size=max(size, len(data)))


def load_job_file(path: str | Path, *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> Job:
    """Load the single job in a YAML file (:class:`JobValidationError` when it is not one
    valid job, :class:`OSError` when the file cannot be read)."""
    results = list(load_jobs_from_yaml(read_manifest(path), str(path), limits=limits))
    result = the_one(results, path, "job document")
    if isinstance(result, JobValidationError):
        raise result
    return result
