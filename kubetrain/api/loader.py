"""Parsing jobs from dicts and YAML, reporting every problem at once with its path."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase
from kubetrain.api.errors import FieldError, JobValidationError, join_path
from kubetrain.api.invariants import check_invariants
from kubetrain.api.k8s_openapi import embedded_schema, strict_schema
from kubetrain.api.mpi import MPIJob
from kubetrain.api.pytorch import PyTorchJob
from kubetrain.api.tensorflow import TFJob

Job = PyTorchJob | TFJob | MPIJob
JOB_TYPES: dict[str, type[JobBase]] = {"PyTorchJob": PyTorchJob, "TFJob": TFJob, "MPIJob": MPIJob}
API_VERSIONS = {
    "PyTorchJob": "kubeflow.org/v1",
    "TFJob": "kubeflow.org/v1",
    "MPIJob": "kubeflow.org/v2beta1",
}
_REPLICA_FIELDS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}


def load_job(obj: Any, source: str = "") -> Job:
    """Parse one job from its wire form; raise :class:`JobValidationError` listing all errors."""
    if not isinstance(obj, dict):
        raise JobValidationError(
            [FieldError("", "a mapping with apiVersion, kind, metadata and spec", obj)], source
        )
    raw_kind = obj.get("kind")
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
    errors: list[FieldError] = []
    api_version = obj.get("apiVersion")
    if api_version != API_VERSIONS[kind]:
        if api_version is None:
            errors.append(
                FieldError("apiVersion", f"{API_VERSIONS[kind]} for a {kind}", kind="required")
            )
        else:
            errors.append(
                FieldError("apiVersion", f"must be {API_VERSIONS[kind]} for a {kind}", api_version)
            )
    job: JobBase | None = None
    try:
        job = model.model_validate(obj)
    except PydanticError as exc:
        errors.extend(e for e in _from_pydantic(exc, model) if e.path != "apiVersion")
    errors.extend(_template_errors(kind, obj))
    errors.extend(check_invariants(kind, obj))
    if errors or job is None:
        raise JobValidationError(errors, source)
    assert isinstance(job, PyTorchJob | TFJob | MPIJob)
    return job


def load_jobs_from_yaml(
    text: str, source: str = ""
) -> Iterator[tuple[int, Job | JobValidationError]]:
    """Parse every YAML document; yields (document index, job or its errors)."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise JobValidationError([FieldError("", f"valid YAML ({exc})")], source) from None
    index = 0
    for document in documents:
        if document is None:
            continue
        label = f"{source} document {index + 1}" if source else f"document {index + 1}"
        try:
            yield index, load_job(document, label)
        except JobValidationError as exc:
            yield index, exc
        index += 1


def load_job_file(path: str | Path) -> Job:
    """Load the single job in a YAML file."""
    text = Path(path).read_text()
    results = list(load_jobs_from_yaml(text, str(path)))
    if len(results) != 1:
        raise JobValidationError(
            [FieldError("", f"exactly one job document, found {len(results)}")], str(path)
        )
    result = results[0][1]
    if isinstance(result, JobValidationError):
        raise result
    return result


# --- pydantic errors -> FieldError ---------------------------------------------------------


def _from_pydantic(exc: PydanticError, model: type[BaseModel]) -> list[FieldError]:
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"]]
        kind = err["type"]
        value = err.get("input")
        ctx = err.get("ctx", {})
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]
            expected = str(err["msg"]).replace("Input should be", "must be")
            out.append(FieldError(join_path(loc), f"replica type {expected}", loc[-1]))
            continue
        path = join_path(loc)
        if kind == "missing":
            out.append(FieldError(path, _describe_field(model, loc), kind="required"))
        elif kind == "extra_forbidden":
            out.append(FieldError(path, _unknown_hint(model, loc), kind="unknown"))
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            op = {
                "greater_than_equal": ">=",
                "less_than_equal": "<=",
                "greater_than": ">",
                "less_than": "<",
            }[kind]
            bound = next(iter(ctx.values()))
            out.append(FieldError(path, f"must be {op} {bound}", value))
        elif kind == "string_pattern_mismatch":
            out.append(FieldError(path, f"must match {ctx.get('pattern')}", value))
        elif kind in ("enum", "literal_error"):
            out.append(
                FieldError(path, str(err["msg"]).replace("Input should be", "must be"), value)
            )
        elif kind in ("int_type", "int_parsing"):
            out.append(FieldError(path, "must be an integer", value))
        elif kind in ("string_type",):
            out.append(FieldError(path, "must be a string", value))
        elif kind in ("bool_type", "bool_parsing"):
            out.append(FieldError(path, "must be true or false", value))
        elif kind in ("dict_type", "model_type", "model_attributes_type"):
            out.append(FieldError(path, "must be a mapping", value))
        elif kind == "list_type":
            out.append(FieldError(path, "must be a list", value))
        elif kind in ("too_short", "too_long", "string_too_long", "string_too_short"):
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
    names = _field_names(owner)
    return _suggest(str(loc[-1]), names)


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


# --- pod templates against the pinned Kubernetes schema ---------------------------------------


@cache
def pod_template_validator() -> Draft7Validator:
    return Draft7Validator(strict_schema(embedded_schema("io.k8s.api.core.v1.PodTemplateSpec")))


def _template_errors(kind: str, obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    specs = spec.get(_REPLICA_FIELDS[kind]) if isinstance(spec, dict) else None
    if not isinstance(specs, dict):
        return []
    out: list[FieldError] = []
    for rtype, rspec in specs.items():
        template = rspec.get("template") if isinstance(rspec, dict) else None
        if not isinstance(template, dict):
            continue
        base: list[str | int] = ["spec", _REPLICA_FIELDS[kind], str(rtype), "template"]
        for error in pod_template_validator().iter_errors(template):
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
    return FieldError(join_path(loc), str(error.message), error.instance)
