"""Embedded Kubernetes types (pod templates, label selectors, metric specs) checked the way
the API server checks a custom resource against its structural schema.

A plain JSON-Schema validator differs from the API server in ways that matter here, so
the validator is extended:

- an ``integer`` is an int, or a float the server takes for one (whole, at most 2**53 - 1
  in size), so a quantity such as ``cpu: 1e308`` or ``cpu: 0.5`` is rejected like the
  server rejects it while ``cpu: 2.0`` passes;
- ``pattern`` is matched as Go does: ``$`` is the end of the text, not a line end;
- ``x-kubernetes-list-type: map`` lists must have unique keys (``containers[].name``,
  ``env[].name``, ``ports[]`` containerPort+protocol, ``volumes[].name``,
  ``volumeMounts[].mountPath``, ...), a missing key taking its schema default (a port
  without a protocol is TCP); ``set`` lists must have unique items;
- unknown fields are rejected, as with ``kubectl``'s strict field validation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from jsonschema import Draft7Validator, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from kubetrain.api.errors import FieldError, cap
from kubetrain.api.k8s_openapi import embedded_schema, strict_schema
from kubetrain.api.limits import MAX_EXACT_FLOAT_INT

LIST_TYPE = "x-kubernetes-list-type"


def _is_integer(checker: Any, instance: Any) -> bool:
    if isinstance(instance, bool):
        return False
    if isinstance(instance, float):
        return is_json_integer(instance)
    return isinstance(instance, int)


def is_json_integer(value: float) -> bool:
    """Whether the API server takes a JSON float for an integer (go-openapi's rule: up to
    2**53 - 1 in size, and whole or within a relative 1e-9 of a whole number)."""
    if not math.isfinite(value) or abs(value) > MAX_EXACT_FLOAT_INT:
        return False
    if value.is_integer():
        return True
    if value < 0:
        return False  # Go's uint64 conversion of a negative float leaves no close match
    truncated = float(math.trunc(value))
    return truncated != 0 and abs(value - truncated) / (value + truncated) < 1e-9


def _is_number(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int | float) and not isinstance(instance, bool)


@cache
def _go_regex(pattern: str) -> re.Pattern[str]:
    # Go's (RE2) ``$`` without the multi-line flag matches only at the end of the text.
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


def _pattern(
    validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not _go_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _describe_key(names: list[str], key: tuple[Any, ...]) -> str:
    pairs = zip(names, key, strict=True)
    return " and ".join(f"{name} {cap(json.dumps(value), 60)}" for name, value in pairs)


def _list_type(
    validator: Validator, list_type: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, list):
        return
    seen: dict[str, int] = {}
    if list_type == "map":
        names = list(schema.get("x-kubernetes-list-map-keys", []))
        properties = schema.get("items", {}).get("properties", {})
        defaults = {name: properties.get(name, {}).get("default") for name in names}
        for index, item in enumerate(instance):
            if not isinstance(item, dict):
                continue  # a type error, reported by the items schema
            key = tuple(item.get(name, defaults[name]) for name in names)
            if any(value is None for value in key):
                continue  # a missing key, reported as required
            marker = json.dumps(key, sort_keys=True)
            if marker in seen:
                yield ValidationError(
                    f"duplicate entry: item {seen[marker]} already has "
                    f"{_describe_key(names, key)}; the API server requires "
                    f"{' + '.join(names)} to be unique in this list",
                    path=[index],
                    validator=LIST_TYPE,
                )
            seen.setdefault(marker, index)
    elif list_type == "set":
        for index, item in enumerate(instance):
            marker = json.dumps(item, sort_keys=True)
            if marker in seen:
                yield ValidationError(
                    f"duplicate value {cap(marker, 60)}: item {seen[marker]} has it already; "
                    "the API server requires the items of this list to be unique",
                    path=[index],
                    validator=LIST_TYPE,
                )
            seen.setdefault(marker, index)


ApiServerValidator = validators.extend(  # type: ignore[no-untyped-call]
    Draft7Validator,
    validators={"pattern": _pattern, LIST_TYPE: _list_type},
    type_checker=Draft7Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_integer, "number": _is_number}
    ),
)


@cache
def validator_for(definition: str) -> Validator:
    """A validator of one embedded Kubernetes type, strict about unknown fields."""
    validator: Validator = ApiServerValidator(strict_schema(embedded_schema(definition)))
    return validator


def drop_pruned_nulls(value: Any, schema: dict[str, Any]) -> Any:
    """A copy of ``value`` without the explicit nulls the API server prunes: nulls of the
    fields a structural schema declares (``properties``) and in its maps
    (``additionalProperties``), at any depth. A null under an unknown key stays (strict
    field validation refuses the key whatever its value) and so does a null list item
    (refused for its type)."""
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        items = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key, items if isinstance(items, dict) else None)
            if sub is None:
                out[key] = item
            elif item is not None:
                out[key] = drop_pruned_nulls(item, sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [drop_pruned_nulls(item, schema["items"]) for item in value]
    return value


def _in_status(error: FieldError) -> bool:
    return error.path == "status" or error.path.startswith(("status.", "status["))


def status_is_ignored(wire: dict[str, Any], errors: list[FieldError]) -> bool:
    """Whether ``wire`` holds a status the API server ignores rather than refuses: its kind
    has the status subresource, so the server does not store what a client sends there
    (only ``/status`` writes it), and a status it cannot read is dropped, not a reason to
    refuse the object. Unknown fields in it are still refused (strict field validation
    decodes the whole object before the status is dropped)."""
    problems = [e for e in errors if _in_status(e)]
    return "status" in wire and bool(problems) and all(e.kind != "unknown" for e in problems)


def without_status(wire: dict[str, Any]) -> dict[str, Any]:
    """``wire`` without its status (see :func:`status_is_ignored`)."""
    return {key: value for key, value in wire.items() if key != "status"}
