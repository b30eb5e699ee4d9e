"""The nodes of a templated object tree: plain dicts, lists and scalars, plus these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class _Missing:
    """A field absent from a render."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Expr:
    """A scalar the template computes: ``{{ <action> }}``."""

    action: str


@dataclass(frozen=True)
class Block:
    """A whole collection from the values: ``{{- toYaml <source> | nindent N }}``."""

    source: str


@dataclass(frozen=True, eq=True)
class Range:
    """List items (or objects) repeated for every element of ``source`` as ``var``."""

    var: str
    source: str
    items: tuple[Any, ...]


@dataclass(frozen=True, eq=True)
class Switch:
    """One branch per option: ``(condition, node)``; the last condition may be None
    (``else``); a node may be MISSING (the field is left out)."""

    branches: tuple[tuple[str | None, Any], ...]
