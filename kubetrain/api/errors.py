"""Validation errors that name the field path, the value received and what is expected.

Everything quoted from the input is capped (``MAX_QUOTED`` characters, then an ellipsis and
the original length), so a 100 kB key or value never turns into a 100 kB message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubetrain.api.limits import MAX_LISTED_ERRORS, MAX_QUOTED

_MISSING = object()


def cap(text: str, limit: int = MAX_QUOTED) -> str:
    """``text`` itself when short, else its first ``limit`` characters, an ellipsis and its
    length, e.g. ``kkkk... (100000 characters)``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        # Not JSON-shaped (a cycle, a 5,000-digit integer, ...): name its type only.
        return f"<{type(value).__name__}>"


def render_value(value: Any, limit: int = 80) -> str:
    """Render a received value compactly (JSON form, truncated) for a message."""
    text = _json_text(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


@dataclass(frozen=True, eq=False)
class FieldError:
    """One problem with one field.

    ``path`` is the dotted wire path (``spec.pytorchReplicaSpecs.Worker.replicas``, list
    items as ``containers[0]``); ``expected`` says what would be valid. ``value`` is the
    received value, or absent when the field is missing. ``subject``, when set, names in
    words the object the field refers to that is at fault (``runtime x (TrainingRuntime)``),
    and the message reads ``<subject> is invalid: <expected>``: the fix is in that object,
    not in the field's value.
    """

    path: str
    expected: str
    value: Any = _MISSING
    kind: str = "invalid"  # invalid | required | unknown
    subject: str = ""

    def __str__(self) -> str:
        where = cap(self.path or "<document>")
        expected = cap(self.expected, 2 * MAX_QUOTED)
        if self.subject:
            return f"{cap(self.subject)} is invalid: {expected}"
        if self.kind == "required":
            return f"{where}: is required: {expected}"
        if self.kind == "unknown":
            return f"{where}: unknown field: {expected}"
        if self.value is _MISSING:
            return f"{where}: is invalid: {expected}"
        return f"{where}: {cap(_json_text(self.value), 80)} is invalid: {expected}"


class JobValidationError(ValueError):
    """Raised when a job manifest has one or more problems; ``errors`` lists them all
    (the message lists the first ``MAX_LISTED_ERRORS``)."""

    def __init__(self, errors: list[FieldError], source: str = "") -> None:
        unique = {str(e): e for e in errors}
        self.errors = sorted(unique.values(), key=lambda e: (e.path, e.expected))
        self.source = source
        head = f"{cap(source)}: " if source else ""
        shown = self.errors[:MAX_LISTED_ERRORS]
        lines = "\n".join(f"  {e}" for e in shown)
        if len(self.errors) > len(shown):
            lines += f"\n  ... and {len(self.errors) - len(shown)} more error(s)"
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
