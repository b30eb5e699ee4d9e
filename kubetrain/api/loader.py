"""Parsing jobs from dicts and YAML, reporting every problem at once with its path.

Whatever it is given, :func:`load_job` returns a job or raises :class:`JobValidationError`
naming each problem's path, in bounded time and memory: the input is first copied into
the shape the API server would hold (``kubetrain.api.reading``: limits on depth and size,
then the explicit nulls the server prunes dropped), then checked by the typed models
(camelCase wire names only), the embedded Kubernetes schemas (``kubetrain.api.embedded``),
the metadata rules (``kubetrain.api.meta``) and the cross-field invariants the CRDs also
enforce (``kubetrain.api.invariants``). A job that loads reloads from its ``to_wire()``.
"""

from __future__ import annotations

import difflib
import os
import sys
import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase
from kubetrain.api.convert.table import older_version_hint
from kubetrain.api.crd_generator import find_info, openapi_schema
from kubetrain.api.embedded import (
    LABEL_SELECTOR,
    LIST_TYPE,
    METRIC_SPEC,
    POD_TEMPLATE,
    drop_pruned_nulls,
    status_is_ignored,
    without_status,
)
from kubetrain.api.embedded import validator_for as embedded_validator
from kubetrain.api.errors import FieldError, JobValidationError, join_path
from kubetrain.api.invariants import check_invariants
from kubetrain.api.job_crds import JOB_CRD_INFOS
from kubetrain.api.kinds import KINDS
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, MAX_FILE_BYTES, ReplicaLimits
from kubetrain.api.meta import OBJECT_META_FIELDS, check_object_meta
from kubetrain.api.mpi import MPIJob
from kubetrain.api.pytorch import PyTorchJob
from kubetrain.api.reading import decode_text, read_documents
from kubetrain.api.rules import (
    CASE_INSENSITIVE_KINDS,
    REPLICA_FIELDS,
    REPLICA_TYPES,
    replica_type_message,
)
from kubetrain.api.tensorflow import TFJob
from kubetrain.api.wire import wire_copy

Job = PyTorchJob | TFJob | MPIJob
JOB_TYPES: dict[str, type[JobBase]] = {
    str(m.model_fields["kind"].default): m for m in (PyTorchJob, TFJob, MPIJob)
}
API_VERSIONS = {kind: info.api_version for kind, info in KINDS.items()}


def load_job(obj: Any, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> Job:
    """Parse one job from its wire form; raise :class:`JobValidationError` listing all errors.

    ``limits`` are the cluster's replica limits (the ones its CRDs were generated with).
    A status that cannot be read is dropped (:func:`status_is_ignored`), as the server does.
    """
    wire, shape_errors = wire_copy(obj)
    if shape_errors:
        raise JobValidationError(shape_errors, source)
    if not isinstance(wire, dict):
        raise JobValidationError(
            [FieldError("", "a mapping with apiVersion, kind, metadata and spec", wire)], source
        )
    raw_kind = wire.get("kind")
    model = JOB_TYPES.get(raw_kind) if isinstance(raw_kind, str) else None
    if model is None or not isinstance(raw_kind, str):
        raise JobValidationError(
            [
                FieldError("kind", f"must be one of: {', '.join(JOB_TYPES)}", raw_kind)
                if raw_kind is not None
                else FieldError("kind", f"one of: {', '.join(JOB_TYPES)}", kind="required")
            ],
            source,
        )
    kind: str = raw_kind
    wire = _drop_pruned_nulls(kind, wire)
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
    job: JobBase | None = None
    try:
        # Only the camelCase wire names: the API server knows no others.
        job = model.model_validate(wire, by_alias=True, by_name=False)
    except PydanticError as exc:
        errors.extend(e for e in _from_pydantic(exc, model, kind) if e.path != "apiVersion")
    errors.extend(_embedded_errors(kind, wire))
    errors.extend(check_object_meta(wire.get("metadata")))
    errors.extend(check_invariants(kind, wire, limits))
    if status_is_ignored(wire, errors):
        return load_job(without_status(wire), source, limits=limits)
    if errors or job is None:
        raise JobValidationError([_as_written(e, kind, renamed) for e in errors], source)
    assert isinstance(job, PyTorchJob | TFJob | MPIJob)
    return job


@cache
def _null_schema(kind: str) -> dict[str, Any]:
    """The job's CRD schema, with metadata as the API server reads it (every ObjectMeta
    field, labels and annotations as maps)."""
    schema = openapi_schema(find_info(JOB_CRD_INFOS, kind), DEFAULT_REPLICA_LIMITS)
    meta_fields: dict[str, Any] = {key: {} for key in OBJECT_META_FIELDS}
    meta_fields["labels"] = meta_fields["annotations"] = {"additionalProperties": {}}
    schema["properties"] = {**schema["properties"], "metadata": {"properties": meta_fields}}
    return schema


def _drop_pruned_nulls(kind: str, wire: dict[str, Any]) -> dict[str, Any]:
    """``wire`` without the explicit nulls the API server prunes (``command:`` with no
    value means no command); nulls under unknown keys stay, to be refused."""
    pruned: dict[str, Any] = drop_pruned_nulls(wire, _null_schema(kind))
    return pruned


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
    """Parse every YAML document; yields (document index, job or its errors).

    A document that cannot be read at all (invalid YAML, nested too deep, an alias bomb)
    raises :class:`JobValidationError` before anything is yielded."""
    documents = list(read_documents(text, source))
    for index, document in enumerate(documents):
        label = f"{source} document {index + 1}" if source else f"document {index + 1}"
        try:
            yield index, load_job(document, label, limits=limits)
        except JobValidationError as exc:
            yield index, exc


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
    text = read_manifest(path)
    results = list(load_jobs_from_yaml(text, str(path), limits=limits))
    if len(results) != 1:
        raise JobValidationError(
            [FieldError("", f"exactly one job document, found {len(results)}")], str(path)
        )
    result = results[0][1]
    if isinstance(result, JobValidationError):
        raise result
    return result


# --- pydantic errors -> FieldError ---------------------------------------------------------


def _from_pydantic(exc: PydanticError, model: type[BaseModel], kind: str) -> list[FieldError]:
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"]]
        error_type = err["type"]
        value = err.get("input")
        ctx = err.get("ctx", {})
        if loc and loc[-1] == "[key]":
            # The same error, path and message as the replica-type invariant (and its CEL).
            loc = loc[:-1]
            out.append(FieldError(join_path(loc), replica_type_message(kind), loc[-1]))
            continue
        path = join_path(loc)
        if error_type == "missing":
            out.append(FieldError(path, _describe_field(model, loc), kind="required"))
        elif error_type == "extra_forbidden":
            out.append(FieldError(path, _unknown_hint(model, loc), kind="unknown"))
        elif error_type in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            op = {
                "greater_than_equal": ">=",
                "less_than_equal": "<=",
                "greater_than": ">",
                "less_than": "<",
            }[error_type]
            bound = next(iter(ctx.values()))
            out.append(FieldError(path, f"must be {op} {bound}", value))
        elif error_type == "string_pattern_mismatch":
            out.append(FieldError(path, f"must match {ctx.get('pattern')}", value))
        elif error_type in ("enum", "literal_error"):
            out.append(
                FieldError(path, str(err["msg"]).replace("Input should be", "must be"), value)
            )
        elif error_type in ("int_type", "int_parsing"):
            out.append(FieldError(path, "must be an integer", value))
        elif error_type in ("string_type",):
            out.append(FieldError(path, "must be a string", value))
        elif error_type in ("bool_type", "bool_parsing"):
            out.append(FieldError(path, "must be true or false", value))
        elif error_type in ("dict_type", "model_type", "model_attributes_type"):
            out.append(FieldError(path, "must be a mapping", value))
        elif error_type == "list_type":
            out.append(FieldError(path, "must be a list", value))
        elif error_type in ("too_short", "too_long"):
            # A list or mapping with too few or too many items (as the schema's minItems,
            # maxItems, minProperties bound it).
            bound = ctx.get("min_length", ctx.get("max_length"))
            word = "at least" if error_type == "too_short" else "at most"
            found = ctx.get("actual_length")
            out.append(FieldError(path, f"must have {word} {bound} item(s), found {found}", value))
        elif error_type in ("string_too_long", "string_too_short"):
            out.append(
                FieldError(
                    path,
                    str(err["msg"])
                    .replace("Value should", "must")
                    .replace("String should", "must"),
                    value,
                )
            )
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            out.append(FieldError(path, message, value))
    return out


def _model_at(model: type[BaseModel], loc: list[str | int]) -> type[BaseModel] | None:
    """The model class that holds the field at ``loc`` (walking aliases, dicts and lists)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next(
                (f for n, f in current.model_fields.items() if (f.alias or n) == part), None
            )
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is list:
            current = get_args(current)[0]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        elif origin is not None and getattr(annotation, "__metadata__", None) is not None:
            annotation = get_args(annotation)[0]
        else:
            return annotation


def _field_names(model: type[BaseModel]) -> list[str]:
    return sorted((f.alias or n) for n, f in model.model_fields.items())


def _unknown_hint(model: type[BaseModel], loc: list[str | int]) -> str:
    owner = _model_at(model, loc[:-1])
    if owner is None:
        return "not part of the schema"
    for name, field in owner.model_fields.items():
        if name == loc[-1] and field.alias and field.alias != name:
            # A Python attribute name: the wire form (and the API server) know the alias.
            return f"did you mean {field.alias!r}? (manifests use the camelCase names)"
    return _suggest(str(loc[-1]), _field_names(owner))


def _suggest(field: str, allowed: list[str]) -> str:
    """'did you mean X?' when one name is close, else the list of allowed names."""
    close = difflib.get_close_matches(field, allowed, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"expected one of: {', '.join(allowed)}"


def _describe_field(model: type[BaseModel], loc: list[str | int]) -> str:
    owner = _model_at(model, loc[:-1])
    if owner is not None and issubclass(owner, KubeModel):
        for n, f in owner.model_fields.items():
            if (f.alias or n) == loc[-1] and f.description:
                return f.description
    return "this field must be set"


# --- embedded Kubernetes types against the pinned schemas --------------------------------------


def _embedded_values(kind: str, wire: dict[str, Any]) -> Iterator[tuple[list[str | int], str, Any]]:
    """(path, Kubernetes definition, value) of every embedded Kubernetes value in a job."""
    spec = wire.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    field = REPLICA_FIELDS[kind]
    specs = spec.get(field)
    for rtype, rspec in (specs if isinstance(specs, dict) else {}).items():
        template = rspec.get("template") if isinstance(rspec, dict) else None
        if isinstance(template, dict):
            yield ["spec", field, rtype, "template"], POD_TEMPLATE, template
    elastic = spec.get("elasticPolicy")
    metrics = elastic.get("metrics") if isinstance(elastic, dict) else None
    for index, metric in enumerate(metrics if isinstance(metrics, list) else []):
        if isinstance(metric, dict):
            yield ["spec", "elasticPolicy", "metrics", index], METRIC_SPEC, metric
    status = wire.get("status")
    replicas = status.get("replicaStatuses") if isinstance(status, dict) else None
    for rtype, rstatus in (replicas if isinstance(replicas, dict) else {}).items():
        selector = rstatus.get("labelSelector") if isinstance(rstatus, dict) else None
        if isinstance(selector, dict):
            path: list[str | int] = ["status", "replicaStatuses", rtype, "labelSelector"]
            yield path, LABEL_SELECTOR, selector


def _embedded_errors(kind: str, wire: dict[str, Any]) -> list[FieldError]:
    out: list[FieldError] = []
    for base, definition, value in _embedded_values(kind, wire):
        for error in embedded_validator(definition).iter_errors(value):
            out.extend(_from_schema_error(base, error))
    return out


def _from_schema_error(base: list[str | int], error: SchemaError) -> list[FieldError]:
    loc = [*base, *error.absolute_path]
    validator = error.validator
    if validator == "additionalProperties":
        schema = error.schema if isinstance(error.schema, dict) else {}
        allowed = sorted(schema.get("properties", {}))
        extras = (
            [k for k in error.instance if k not in allowed]
            if isinstance(error.instance, dict)
            else []
        )
        out = []
        for field in extras:
            out.append(
                FieldError(join_path([*loc, field]), _suggest(field, allowed), kind="unknown")
            )
        return out
    return [_from_schema_value_error(loc, error)]


def _from_schema_value_error(loc: list[str | int], error: SchemaError) -> FieldError:
    validator = error.validator
    if validator == "required":
        missing = str(error.message).split("'")[1] if "'" in str(error.message) else "?"
        return FieldError(
            join_path([*loc, missing]), "required by the Kubernetes schema", kind="required"
        )
    if validator == "type":
        return FieldError(
            join_path(loc), f"must be of type {error.validator_value}", error.instance
        )
    if validator == "enum":
        allowed = error.validator_value if isinstance(error.validator_value, list) else []
        return FieldError(
            join_path(loc),
            f"must be one of: {', '.join(str(v) for v in allowed)}",
            error.instance,
        )
    if validator == "anyOf":
        return FieldError(join_path(loc), "must be an integer or a string", error.instance)
    if validator == "pattern":
        return FieldError(join_path(loc), f"must match {error.validator_value}", error.instance)
    if validator == LIST_TYPE:
        return FieldError(join_path(loc), str(error.message))
    if validator in ("minimum", "maximum"):
        op = ">=" if validator == "minimum" else "<="
        return FieldError(join_path(loc), f"must be {op} {error.validator_value}", error.instance)
    return FieldError(join_path(loc), str(error.message), error.instance)
