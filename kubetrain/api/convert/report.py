"""What a conversion says about each document: what it carried, what has no equivalent in
the target (by field path, with the value) and what the user must decide.

Every converter (older Kubeflow versions to the served ones, v1 jobs to TrainJobs)
returns a :class:`Conversion`; ``kubetrain convert`` prints its notes and exits 1 when
anything could not be carried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kubetrain.api.errors import render_value


class NoteKind(StrEnum):
    """How a field fared."""

    #: Moved or renamed into the target, value unchanged (``from`` -> ``to``).
    CARRIED = "carried"
    #: The target has no equivalent: the value is not in the output.
    DROPPED = "dropped"
    #: Carried, but the meaning may differ, or the converter chose among options: the user
    #: should check it.
    DECIDE = "decide"


@dataclass(frozen=True)
class Note:
    """One field's fate: ``path`` in the input, ``target`` in the output (None when
    dropped), the input's ``value`` and a sentence saying why."""

    kind: NoteKind
    path: str
    message: str
    target: str | None = None
    value: Any = None

    def line(self) -> str:
        where = f"{self.path} -> {self.target}" if self.target else self.path
        shown = f" ({render_value(self.value)})" if self.value is not None else ""
        return f"{self.kind.value}: {where}{shown}: {self.message}"


@dataclass
class Conversion:
    """A converted document and the notes on how. ``output`` is the wire form of the
    target object; ``source`` names the input (file and document index)."""

    output: dict[str, Any]
    source: str = ""
    notes: list[Note] = field(default_factory=list)
    #: Output paths the converter wrote itself (an older version's default the input left
    #: unset), not the user: a later step that cannot carry them drops nothing of theirs.
    written_defaults: set[str] = field(default_factory=set)

    def carried(self, path: str, target: str, message: str = "", value: Any = None) -> None:
        self.notes.append(Note(NoteKind.CARRIED, path, message or "moved", target, value))

    def dropped(self, path: str, value: Any, message: str) -> None:
        self.notes.append(Note(NoteKind.DROPPED, path, message, None, value))

    def decide(self, path: str, target: str | None, value: Any, message: str) -> None:
        self.notes.append(Note(NoteKind.DECIDE, path, message, target, value))

    @property
    def complete(self) -> bool:
        """Whether everything the input said is in the output (no dropped field)."""
        return not any(n.kind is NoteKind.DROPPED for n in self.notes)
