"""Structural OpenAPI v3 schemas generated from the typed models.

The same models that parse and serialize jobs describe them to the API server: every
field's type, bounds, enum and description come from its annotation, embedded
Kubernetes types come from the pinned OpenAPI (``k8s_openapi``), and each model's
``cel_rules`` become ``x-kubernetes-validations``. No schema YAML is written by hand.
"""

from __future__ import annotations

import types
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kubetrain.api.base import (
    INT64_MAX,
    CelRule,
    K8sSchema,
    KubeModel,
    ListType,
    SchemaFormat,
    SchemaPattern,
    StoredDefault,
)
from kubetrain.api.k8s_openapi import embedded_schema

#: Most replica types a job's map of replica specs may hold in the CRD schema: the five of
#: a TFJob. More would push the estimated cost of the rules over each replica's containers
#: past the API server's budget.
MAX_REPLICA_TYPES = 5


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of a model: an object with its fields as properties."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        wire = field.alias or name
        properties[wire] = field_schema(field)
        if field.is_required():
            required.append(wire)
    out: dict[str, Any] = {"type": "object"}
    if properties:
        # A model without fields (an ML policy source without settings) is an object with
        # none: an empty ``properties`` would not survive the API server's round trip (apply
        # then diff).
        out["properties"] = dict(sorted(properties.items()))
    if required:
        out["required"] = sorted(required)
    rules: tuple[CelRule, ...] = getattr(model, "cel_rules", ())
    if rules:
        out["x-kubernetes-validations"] = [r.to_schema() for r in rules]
    return out


def field_schema(field: FieldInfo) -> dict[str, Any]:
    schema = type_schema(field.annotation, list(field.metadata))
    if field.description and "description" not in schema:
        schema = {"description": field.description, **schema}
    return schema


def _strip_optional(annotation: Any) -> Any:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def type_schema(annotation: Any, metadata: list[Any]) -> dict[str, Any]:
    """Schema of one annotated type. ``metadata`` carries constraints and markers."""
    annotation = _strip_optional(annotation)
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        return type_schema(base, [*extra, *metadata])
    for marker in metadata:
        if isinstance(marker, K8sSchema):
            return dict(embedded_schema(marker.definition))
        if isinstance(marker, FieldInfo):
            metadata = [*metadata, *marker.metadata]
    origin = get_origin(annotation)
    schema: dict[str, Any]
    if origin in (Union, types.UnionType):
        kinds = {_scalar_type(a) for a in get_args(annotation)}
        if kinds == {"integer", "string"}:
            schema = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
        else:
            raise TypeError(f"unsupported union in schema: {annotation}")
    elif origin is Literal:
        values = list(get_args(annotation))
        schema = {"type": "string", "enum": values}
    elif origin is dict:
        key_type, value_type = get_args(annotation)
        schema = {"type": "object", "additionalProperties": type_schema(value_type, [])}
        if isinstance(key_type, type) and issubclass(key_type, Enum):
            # Which keys are allowed is a root CEL rule (kubetrain.api.invariants, with the
            # same message as kubetrain validate). A bound keeps CEL's cost estimates
            # finite; it leaves room for a few unknown types, so that one of them still
            # gets the rule's message rather than "Too many".
            schema["maxProperties"] = MAX_REPLICA_TYPES
        elif value_type is Any:
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    elif origin is list:
        (item_type,) = get_args(annotation)
        schema = {"type": "array", "items": type_schema(item_type, [])}
    elif isinstance(annotation, type) and issubclass(annotation, KubeModel):
        schema = model_schema(annotation)
    elif isinstance(annotation, type) and issubclass(annotation, Enum):
        schema = {"type": "string", "enum": [str(m.value) for m in annotation]}
    else:
        schema = {"type": _scalar_type(annotation)}
    _apply_constraints(schema, metadata)
    return schema


def _scalar_type(annotation: Any) -> str:
    annotation = _strip_optional(annotation)
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is bool:
        return "boolean"
    if annotation is int:
        return "integer"
    if annotation is float:
        return "number"
    if annotation is str:
        return "string"
    raise TypeError(f"unsupported type in schema: {annotation!r}")


def _apply_constraints(schema: dict[str, Any], metadata: list[Any]) -> None:
    is_array_or_object = schema.get("type") in ("array", "object")
    for marker in metadata:
        if isinstance(marker, SchemaFormat):
            schema["format"] = marker.name
        elif isinstance(marker, StoredDefault):
            schema["default"] = marker.value
        elif isinstance(marker, SchemaPattern):
            schema["pattern"] = marker.regex
        elif isinstance(marker, annotated_types.Ge):
            # The API server does not enforce ``format: int32``: the bounds are explicit.
            schema["minimum"] = marker.ge
        elif isinstance(marker, annotated_types.Le):
            # An int64 bound is implied: the server reads larger numbers as floats, which
            # an integer field refuses.
            if marker.le != INT64_MAX:
                schema["maximum"] = marker.le
        elif isinstance(marker, annotated_types.MinLen):
            key = "minItems" if schema.get("type") == "array" else "minProperties"
            schema[key if is_array_or_object else "minLength"] = marker.min_length
        elif isinstance(marker, annotated_types.MaxLen):
            schema["maxItems" if schema.get("type") == "array" else "maxLength"] = marker.max_length
        elif isinstance(marker, ListType):
            schema["x-kubernetes-list-type"] = marker.kind
            if marker.keys:
                schema["x-kubernetes-list-map-keys"] = list(marker.keys)
            for key, default in marker.key_defaults:
                # Copies: the items' schema may be a shared embedded Kubernetes schema.
                items = schema["items"]
                properties = {**items["properties"], key: {**items["properties"][key]}}
                properties[key]["default"] = default
                schema["items"] = {**items, "properties": properties}
        elif hasattr(marker, "pattern") and getattr(marker, "pattern", None):
            schema["pattern"] = marker.pattern
