"""Writing templated objects (:mod:`kubetrain.gitops.helm.template`) as Helm template
text: block YAML with ``{{- if }}``/``{{- range }}`` lines where the renders differ.

Every control line starts with ``{{-``, which trims the line break before it, so a
template renders the same YAML whichever branch is taken; keys come in the order
``kubetrain.manifest`` writes them (apiVersion, kind, metadata, then sorted).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubetrain.gitops.helm.nodes import MISSING, Block, Expr, Range, Switch

_FIRST = ("apiVersion", "kind", "metadata")
_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
# Plain scalars YAML 1.1 (go-yaml, which helm uses) reads as something other than a string.
_RESERVED = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}


def scalar(value: Any) -> str:
    """One scalar as template text."""
    if isinstance(value, Expr):
        return "{{ " + value.action + " }}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {value!r} ({type(value).__name__}) into a template")
    if "{{" in value or "}}" in value:
        # Helm would read it as a template action: let the template print the literal.
        return "{{ " + json.dumps(value) + " | toJson }}"
    if _PLAIN.match(value) and value.lower() not in _RESERVED:
        return value
    return json.dumps(value)


def _key(key: Any) -> str:
    if isinstance(key, Expr):
        return scalar(key)
    return scalar(str(key))


def _ordered(node: dict[Any, Any]) -> list[Any]:
    first = [k for k in _FIRST if k in node]
    return first + sorted((k for k in node if k not in _FIRST), key=str)


def _control(indent: int, text: str) -> str:
    return " " * indent + "{{- " + text + " }}"


def _is_control(line: str) -> bool:
    return line.lstrip().startswith("{{-")


def _switch(indent: int, node: Switch, emit: Any) -> list[str]:
    if len(node.branches) == 2 and node.branches[0][1] is MISSING and node.branches[1][0] is None:
        # Only the else branch has the node: one ``if not``, no empty branch.
        only = str(node.branches[0][0])
        negated = f"not ({only})" if " " in only else f"not {only}"
        return [
            _control(indent, f"if {negated}"),
            *emit(node.branches[1][1]),
            _control(indent, "end"),
        ]
    lines: list[str] = []
    for index, (condition, branch) in enumerate(node.branches):
        if condition is None and branch is MISSING:
            continue
        if condition is None:
            lines.append(_control(indent, "else"))
        else:
            lines.append(_control(indent, ("if " if index == 0 else "else if ") + condition))
        if branch is not MISSING:
            lines += emit(branch)
    lines.append(_control(indent, "end"))
    return lines


def entry(key: Any, value: Any, indent: int) -> list[str]:
    """``key: value`` at ``indent``, as lines."""
    pad = " " * indent
    if isinstance(value, Switch):
        return _switch(indent, value, lambda branch: entry(key, branch, indent))
    if isinstance(value, Block):
        return [f"{pad}{_key(key)}: {{{{- toYaml {value.source} | nindent {indent + 2} }}}}"]
    if isinstance(value, dict) and value:
        return [f"{pad}{_key(key)}:", *mapping(value, indent + 2)]
    if isinstance(value, list) and value:
        return [f"{pad}{_key(key)}:", *sequence(value, indent)]
    if isinstance(value, dict | list):
        return [f"{pad}{_key(key)}: {'{}' if isinstance(value, dict) else '[]'}"]
    return [f"{pad}{_key(key)}: {scalar(value)}"]


def mapping(node: dict[Any, Any], indent: int) -> list[str]:
    """A block mapping's lines."""
    return [line for key in _ordered(node) for line in entry(key, node[key], indent)]


def item(value: Any, indent: int) -> list[str]:
    """One ``- item`` of a block sequence, as lines."""
    pad = " " * indent
    if isinstance(value, Switch):
        return _switch(indent, value, lambda branch: item(branch, indent))
    if isinstance(value, Range):
        lines = [_control(indent, f"range {value.var} := {value.source}")]
        for each in value.items:
            lines += item(each, indent)
        return [*lines, _control(indent, "end")]
    if isinstance(value, dict | list) and value:
        inner = (
            mapping(value, indent + 2) if isinstance(value, dict) else sequence(value, indent + 2)
        )
        if _is_control(inner[0]):
            return [f"{pad}-", *inner]
        return [f"{pad}- {inner[0][indent + 2 :]}", *inner[1:]]
    if isinstance(value, dict | list):
        return [f"{pad}- {'{}' if isinstance(value, dict) else '[]'}"]
    return [f"{pad}- {scalar(value)}"]


def sequence(node: list[Any], indent: int) -> list[str]:
    """A block sequence's lines."""
    return [line for value in node for line in item(value, indent)]


def documents(objects: dict[str, Any]) -> str:
    """Templated top-level objects (by identity) as one template file, one document each."""
    lines: list[str] = []

    def document(obj: Any) -> list[str]:
        if isinstance(obj, Switch):
            return _switch(0, obj, document)
        if isinstance(obj, Range):
            out = [_control(0, f"range {obj.var} := {obj.source}")]
            for each in obj.items:
                out += document(each)
            return [*out, _control(0, "end")]
        return ["---", *mapping(obj, 0)]

    for obj in objects.values():
        lines += document(obj)
    return "\n".join(lines) + "\n"
