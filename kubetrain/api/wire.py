"""A JSON-shaped value as the API server would hold it: the copy both loaders validate,
made without recursion and within the same depth and size limits as reading YAML; and
the readers the rules of both groups take a wire object apart with."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from kubetrain.api.errors import FieldError, join_path
from kubetrain.api.limits import INT64_MAX, INT64_MIN, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from kubetrain.api.reading import (
    DEPTH_MESSAGE,
    INT_RANGE_MESSAGE,
    NODES_MESSAGE,
    NOT_FINITE_MESSAGE,
    describe_value,
    size_error,
)

#: Most bytes one value of the JSON form can take per character of a string or key
#: (``\u0000`` escapes), and at most per number, boolean or null (``-9223372036854775808``).
_JSON_BYTES_PER_CHAR = 6
_JSON_BYTES_PER_SCALAR = 24


def wire_copy(obj: Any) -> tuple[Any, list[FieldError]]:
    """A copy of ``obj`` as the API server would hold it, and what makes it unreadable.

    Tuples become lists. Explicit nulls stay: which ones the server prunes depends on the
    schema (``embedded.drop_pruned_nulls``). Floats stay floats, as JSON sends them:
    ``2.0`` is a float to the server, which a CEL rule reading the field refuses, so
    kubetrain refuses it in its typed fields.
    Errors: keys that are not strings, values that are not JSON (sets, bytes, dates,
    objects), NaN and infinities, integers outside 64 bits, nesting deeper than
    ``MAX_DEPTH`` (a cycle included), more than ``MAX_NODES`` values, and a compact JSON
    form over ``MAX_FILE_BYTES`` (the limit ``kubetrain validate`` puts on a file). The
    walk is iterative and stops at the node limit, so any object, however large or shared,
    is handled in bounded time.
    """
    errors: list[FieldError] = []
    nodes = 0
    # An upper bound of the JSON form's size; it is measured exactly only when the bound
    # passes the limit, so ordinary jobs are never serialized here.
    bound = 0
    root: list[Any] = [None]
    # (source, parent container, key or index in the parent, path parts)
    pending: list[tuple[Any, Any, str | int, tuple[str | int, ...]]] = [(obj, root, 0, ())]
    while pending:
        value, parent, slot, parts = pending.pop()
        nodes += 1
        if nodes > MAX_NODES:
            errors.append(FieldError(join_path(parts), NODES_MESSAGE))
            break
        if isinstance(value, dict | list | tuple) and len(parts) >= MAX_DEPTH:
            errors.append(FieldError(join_path(parts), DEPTH_MESSAGE))
            continue
        copied: Any
        if isinstance(value, dict):
            copied = {}
            bound += 2
            for key, item in value.items():
                if not isinstance(key, str):
                    errors.append(
                        FieldError(
                            join_path(parts),
                            f"mapping keys must be strings, found {describe_value(key)}",
                            describe_value(key),
                        )
                    )
                else:
                    bound += _JSON_BYTES_PER_CHAR * len(key) + 4
                    # A placeholder keeps the key order; the value is filled when popped.
                    copied[key] = None
                    pending.append((item, copied, key, (*parts, key)))
        elif isinstance(value, list | tuple):
            copied = [None] * len(value)
            bound += 2 + len(value)
            for i in range(len(value) - 1, -1, -1):
                pending.append((value[i], copied, i, (*parts, i)))
        elif isinstance(value, str):
            copied = value
            bound += _JSON_BYTES_PER_CHAR * len(value) + 2
        elif isinstance(value, bool) or value is None:
            copied = value
            bound += _JSON_BYTES_PER_SCALAR
        elif isinstance(value, int):
            copied = value
            bound += _JSON_BYTES_PER_SCALAR
            if not INT64_MIN <= value <= INT64_MAX:
                errors.append(FieldError(join_path(parts), INT_RANGE_MESSAGE, _big(value)))
        elif isinstance(value, float):
            copied = value
            bound += _JSON_BYTES_PER_SCALAR
            if not math.isfinite(value):
                errors.append(FieldError(join_path(parts), NOT_FINITE_MESSAGE, str(value)))
        else:
            errors.append(
                FieldError(
                    join_path(parts),
                    f"a JSON value (mapping, list, string, number, boolean), found "
                    f"{type(value).__name__}",
                )
            )
            copied = None
        parent[slot] = copied
    if not errors and bound > MAX_FILE_BYTES:
        size = len(json.dumps(root[0], separators=(",", ":"), ensure_ascii=False).encode())
        too_large = size_error(size, "as JSON")
        if too_large is not None:
            errors.append(too_large)
    return root[0], errors


# --- reading a wire object whatever its shape (rules run on input the models may refuse) ---


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def at(obj: Any, *keys: str) -> Any:
    """The value at ``keys``, None where a step is not a mapping or lacks the key."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def items_at(obj: Any, *keys: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, item) of the mapping items of the list at ``keys``."""
    for index, item in enumerate(as_list(at(obj, *keys))):
        if isinstance(item, dict):
            yield index, item


def _big(value: int) -> str:
    # str() of a huge integer is slow (and refused past 4,300 digits): estimate its size.
    return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
