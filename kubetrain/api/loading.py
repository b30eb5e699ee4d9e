"""What the loaders of both groups share (``kubetrain.api.loader`` for Kubeflow v1's jobs,
``kubetrain.api.trainer.loader`` for Trainer v2's kinds): reading the kind of an input,
the CRD schema the API server prunes explicit nulls by, the walk over every embedded
Kubernetes value and unique-key list the typed models leave to the pinned schemas, and the
translation of pydantic's and the JSON schemas' errors into :class:`FieldError` with the
path the API server would name; the per-document loop and the one-object file too.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from kubetrain.api.base import K8sSchema, KubeModel, ListType
from kubetrain.api.crd_generator import CrdInfo, openapi_schema
from kubetrain.api.embedded import LIST_TYPE, _list_type, drop_pruned_nulls
from kubetrain.api.embedded import validator_for as embedded_validator
from kubetrain.api.errors import FieldError, JobValidationError, join_path
from kubetrain.api.kinds import KINDS
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS
from kubetrain.api.meta import OBJECT_META_FIELDS, check_object_meta
from kubetrain.api.reading import document_label, read_documents
from kubetrain.api.wire import wire_copy

Loaded = TypeVar("Loaded")
Model = TypeVar("Model", bound=BaseModel)

# --- the input's kind, and the nulls the server prunes -----------------------------------------


def kind_error(raw_kind: Any, kinds: tuple[str, ...]) -> FieldError:
    """The error of a ``kind`` missing or not among ``kinds``."""
    if raw_kind is None:
        return FieldError("kind", f"one of: {', '.join(kinds)}", kind="required")
    return FieldError("kind", f"must be one of: {', '.join(kinds)}", raw_kind)


def read_kind(
    obj: Any, source: str, models: dict[str, type[Loaded]], infos: tuple[CrdInfo, ...]
) -> tuple[dict[str, Any], str, type[Loaded]]:
    """The wire copy of ``obj`` (bounded, without the nulls the API server prunes), its
    kind and that kind's model among ``models``; :class:`JobValidationError` when ``obj``
    is not a mapping of one of them."""
    wire, shape_errors = wire_copy(obj)
    if shape_errors:
        raise JobValidationError(shape_errors, source)
    if not isinstance(wire, dict):
        raise JobValidationError(
            [FieldError("", "a mapping with apiVersion, kind, metadata and spec", wire)], source
        )
    raw_kind = wire.get("kind")
    model = models.get(raw_kind) if isinstance(raw_kind, str) else None
    if model is None or not isinstance(raw_kind, str):
        raise JobValidationError([kind_error(raw_kind, tuple(models))], source)
    info = next(i for i in infos if i.kind.kind == raw_kind)
    pruned: dict[str, Any] = drop_pruned_nulls(wire, null_schema(info))
    return pruned, raw_kind, model


@cache
def null_schema(info: CrdInfo) -> dict[str, Any]:
    """The kind's CRD schema, with metadata as the API server reads it (every ObjectMeta
    field, labels and annotations as maps)."""
    schema = openapi_schema(info, DEFAULT_REPLICA_LIMITS)
    meta_fields: dict[str, Any] = {key: {} for key in OBJECT_META_FIELDS}
    meta_fields["labels"] = meta_fields["annotations"] = {"additionalProperties": {}}
    schema["properties"] = {**schema["properties"], "metadata": {"properties": meta_fields}}
    return schema


def load_typed(
    model: type[Model], kind: str, wire: dict[str, Any]
) -> tuple[Model | None, list[FieldError]]:
    """``wire`` as ``model`` (None when it is not one), with the errors of the typed model,
    of the embedded Kubernetes values and unique-key lists, and of the metadata; the
    caller reports ``apiVersion``, naming the version its kind is served in."""
    loaded: Model | None = None
    errors: list[FieldError] = []
    try:
        # Only the camelCase wire names: the API server knows no others.
        loaded = model.model_validate(wire, by_alias=True, by_name=False)
    except PydanticError as exc:
        errors.extend(e for e in from_pydantic(exc, model, kind) if e.path != "apiVersion")
    errors.extend(schema_walk_errors(model, wire))
    errors.extend(check_object_meta(wire.get("metadata")))
    return loaded, errors


# --- documents and files --------------------------------------------------------------------


def load_documents(
    text: str, source: str, load: Callable[[Any, str], Loaded]
) -> Iterator[tuple[int, Loaded | JobValidationError]]:
    """``load`` each YAML document; yields (document index, what it loaded or its errors).

    A document that cannot be read at all (invalid YAML, nested too deep, an alias bomb)
    raises :class:`JobValidationError` before anything is yielded."""
    documents = list(read_documents(text, source))
    for index, document in enumerate(documents):
        try:
            yield index, load(document, document_label(source, index))
        except JobValidationError as exc:
            yield index, exc


def the_one(results: Sequence[tuple[int, Loaded]], path: str | Path, what: str) -> Loaded:
    """What a file's only document loaded (or its errors); :class:`JobValidationError`
    naming ``what`` was expected when the file has not exactly one document."""
    if len(results) != 1:
        raise JobValidationError(
            [FieldError("", f"exactly one {what}, found {len(results)}")], str(path)
        )
    return results[0][1]


# --- what the typed models leave to the schemas: embedded Kubernetes types, list keys ------


def schema_walk_errors(model: type[BaseModel], wire: dict[str, Any]) -> list[FieldError]:
    """Errors of the embedded Kubernetes values (against the pinned schemas) and of the
    lists whose items the API server requires to have unique keys."""
    errors: list[FieldError] = []
    for path, marker, value in _marked_values(model, wire, []):
        if isinstance(marker, K8sSchema):
            for error in embedded_validator(marker.definition).iter_errors(value):
                errors.extend(from_schema_error(path, error))
        else:
            keys_schema = {
                "x-kubernetes-list-map-keys": list(marker.keys),
                "items": {
                    "properties": {key: {"default": d} for key, d in marker.key_defaults},
                },
            }
            for error in _list_type(None, marker.kind, value, keys_schema):  # type: ignore[arg-type]
                errors.extend(from_schema_error(path, error))
    return errors


def _marked_values(
    model: type[BaseModel], wire: Any, path: list[str | int]
) -> Iterator[tuple[list[str | int], K8sSchema | ListType, Any]]:
    """(path, marker, value) of every value of ``wire`` whose field carries a K8sSchema
    (an embedded Kubernetes type, a mapping) or a ListType with unique items (a list)."""
    if not isinstance(wire, dict):
        return
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in wire:
            yield from _walk(field.annotation, list(field.metadata), wire[key], [*path, key])


def _walk(
    annotation: Any, metadata: list[Any], value: Any, path: list[str | int]
) -> Iterator[tuple[list[str | int], K8sSchema | ListType, Any]]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            yield from _walk(args[0], metadata, value, path)
        return
    if origin is Annotated:
        base, *extra = get_args(annotation)
        yield from _walk(base, [*extra, *metadata], value, path)
        return
    for marker in metadata:
        if isinstance(marker, K8sSchema):
            if isinstance(value, dict):
                yield path, marker, value
            return
        if isinstance(marker, ListType) and marker.kind != "atomic" and isinstance(value, list):
            yield path, marker, value
    if origin is list and isinstance(value, list):
        (item,) = get_args(annotation)
        for index, element in enumerate(value):
            yield from _walk(item, [], element, [*path, index])
    elif origin is dict and isinstance(value, dict):
        _, item = get_args(annotation)
        for key, element in value.items():
            yield from _walk(item, [], element, [*path, key])
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _marked_values(annotation, value, path)


# --- pydantic errors -> FieldError ---------------------------------------------------------


def from_pydantic(exc: PydanticError, model: type[BaseModel], kind: str) -> list[FieldError]:
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"]]
        error_type = err["type"]
        value = err.get("input")
        ctx = err.get("ctx", {})
        if loc and loc[-1] == "[key]":
            # The same error, path and message as the replica-type invariant (and its CEL).
            loc = loc[:-1]
            out.append(FieldError(join_path(loc), KINDS[kind].replica_type_message(), loc[-1]))
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


# --- JSON schema errors -> FieldError -------------------------------------------------------


def from_schema_error(base: list[str | int], error: SchemaError) -> list[FieldError]:
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
