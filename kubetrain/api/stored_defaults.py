"""The defaults the API server stores, applied in code from the same markers.

A field annotated with :class:`~kubetrain.api.base.StoredDefault` gets that value as its
CRD schema's ``default`` (``kubetrain.api.schema``), so the API server writes it into every
stored object that leaves the field out. :func:`fill_stored_defaults` writes the same values
into a wire-form object the way the server's structural defaulting does: a default applies
where its parent object exists and the field is absent, and objects are not created to
hold one. The defaulting steps of every kind start from it, so the operator's defaults and
the stored object's can never disagree.
"""

from __future__ import annotations

import types
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from kubetrain.api.base import KubeModel, StoredDefault

#: How to reach the models below a field: the model itself, or the items of a list or the
#: values of a map holding models.
_ONE, _ITEMS, _VALUES = "one", "items", "values"


def _unwrap(annotation: Any) -> Any:
    """The type under ``Annotated`` and ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, KubeModel)


@cache
def _plan(
    model: type[BaseModel],
) -> tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, str, type[BaseModel]], ...]]:
    """(wire name, default) of the model's own fields, and (wire name, how, model) of the
    fields holding models, each computed once per model."""
    defaults: list[tuple[str, Any]] = []
    nested: list[tuple[str, str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        wire = field.alias or name
        for marker in field.metadata:
            if isinstance(marker, StoredDefault):
                defaults.append((wire, marker.value))
        inner = _unwrap(field.annotation)
        origin = get_origin(inner)
        if _is_model(inner):
            nested.append((wire, _ONE, inner))
        elif origin is list and _is_model(_unwrap(get_args(inner)[0])):
            nested.append((wire, _ITEMS, _unwrap(get_args(inner)[0])))
        elif origin is dict and _is_model(_unwrap(get_args(inner)[1])):
            nested.append((wire, _VALUES, _unwrap(get_args(inner)[1])))
    return tuple(defaults), tuple(nested)


def fill_stored_defaults(model: type[BaseModel], wire: dict[str, Any]) -> None:
    """Write the stored defaults of ``model`` and the models below it into ``wire``, in
    place. Values of the wrong shape are left alone (the loader reports them)."""
    pending: list[tuple[type[BaseModel], Any]] = [(model, wire)]
    while pending:
        current, value = pending.pop()
        if not isinstance(value, dict):
            continue
        defaults, nested = _plan(current)
        for key, default in defaults:
            if key not in value:
                value[key] = default
        for key, how, inner in nested:
            child = value.get(key)
            if how == _ONE:
                pending.append((inner, child))
            elif how == _ITEMS and isinstance(child, list):
                pending.extend((inner, item) for item in child)
            elif how == _VALUES and isinstance(child, dict):
                pending.extend((inner, item) for item in child.values())


def stored_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Every stored default of ``model`` by wire path (``spec.runPolicy.suspend``; ``[]``
    for a list's items, ``{}`` for a map's values), for documentation and tests."""
    out: dict[str, Any] = {}
    pending: list[tuple[type[BaseModel], str]] = [(model, "")]
    while pending:
        current, prefix = pending.pop()
        defaults, nested = _plan(current)
        for key, default in defaults:
            out[f"{prefix}{key}"] = default
        for key, how, inner in nested:
            suffix = {_ONE: "", _ITEMS: "[]", _VALUES: "{}"}[how]
            pending.append((inner, f"{prefix}{key}{suffix}."))
    return dict(sorted(out.items()))
