"""Validation errors that name the field path, the value received and what is expected."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_MISSING = object()


def render_value(value: Any, limit: int = 80) -> str:
    """Render a received value compactly (JSON form, truncated) for an error message."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


@dataclass(frozen=True, eq=False)
class FieldError:
    """One problem with one field.

    ``path`` is the dotted wire path (``spec.pytorchReplicaSpecs.Worker.replicas``, list
    items as ``containers[0]``); ``expected`` says what would be valid. ``value`` is the
    received value, or absent when the field is missing.
    """

    path: str
    expected: str
    value: Any = _MISSING
    kind: str = "invalid"  # invalid | required | unknown

    def __str__(self) -> str:
        where = self.path or "<document>"
        if self.kind == "required":
            return f"{where}: is required: {self.expected}"
        if self.kind == "unknown":
            return f"{where}: unknown field: {self.expected}"
        if self.value is _MISSING:
            return f"{where}: is invalid: {self.expected}"
        return f"{where}: {render_value(self.value)} is invalid: {self.expected}"


class JobValidationError(ValueError):
    """Raised when a job manifest has one or more problems; ``errors`` lists them all."""

    def __init__(self, errors: list[FieldError], source: str = "") -> None:
        unique = {str(e): e for e in errors}
        self.errors = sorted(unique.values(), key=lambda e: (e.path, e.expected))
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{head}{len(self.errors)} error(s):\n{lines}")


def join_path(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """Join path parts into ``a.b[0].c`` form."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
