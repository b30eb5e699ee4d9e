"""Probes: values rendered as distinctive texts, found again in the output and replaced
by the template expressions that read them (see :mod:`kubetrain.gitops.helm.template`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain.gitops.helm.nodes import Block, Expr, Range


@dataclass(frozen=True)
class ScalarProbe:
    """A scalar value rendered as ``text``; the template reads ``source``."""

    text: str
    source: str
    kind: str = "str"  # "str", "int" or "float": how Go formats it inside a string


@dataclass(frozen=True)
class WholeProbe:
    """A collection rendered as ``value`` (a dict or list) from ``source``."""

    value: Any
    source: str


@dataclass(frozen=True)
class EachProbe:
    """A list rendered from two probe elements; the items using ``texts[0]`` and, right
    after them, the same items using ``texts[1]`` become one ``range``."""

    texts: tuple[str, str]
    source: str
    var: str


Probe = ScalarProbe | WholeProbe | EachProbe


def _contains(node: Any, text: str) -> bool:
    if isinstance(node, dict):
        return any(_contains(k, text) or _contains(v, text) for k, v in node.items())
    if isinstance(node, list | tuple):
        return any(_contains(v, text) for v in node)
    if isinstance(node, Range):
        return _contains(node.items, text)
    return isinstance(node, str | int | float) and not isinstance(node, bool) and text in str(node)


def _replace(node: Any, old: str, new: str) -> Any:
    if isinstance(node, dict):
        return {_replace(k, old, new): _replace(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace(v, old, new) for v in node]
    if isinstance(node, str):
        return node.replace(old, new)
    return node


def _number_pattern(text: str) -> str:
    # A number inside a string only where no other digit or word character touches it.
    return rf"(?<![\w.]){re.escape(text)}(?![\w.])"


def _substitute(value: Any, probes: Sequence[ScalarProbe]) -> Any:
    """A scalar with every probe replaced by its template expression."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        for probe in probes:
            if probe.kind != "str" and str(value) == probe.text:
                return Expr(f"{probe.source} | toJson")
        return value
    if not isinstance(value, str):
        return value
    if not any(p.text in value for p in probes):
        return value  # most texts hold no probe: no pattern can match
    patterns = [
        (re.escape(p.text) if p.kind == "str" else _number_pattern(p.text), p)
        for p in sorted(probes, key=lambda p: -len(p.text))
    ]
    found = [(m.start(), m.end(), p) for pat, p in patterns for m in re.finditer(pat, value)]
    if not found:
        return value
    found.sort(key=lambda f: f[0])
    if len(found) == 1 and found[0][2].kind == "str" and found[0][:2] == (0, len(value)):
        return Expr(f"{found[0][2].source} | toJson")
    fmt, args, at = "", [], 0
    for start, end, probe in found:
        if start < at:
            raise ValueError(f"probes overlap in {value!r}: choose distinct probe texts")
        fmt += value[at:start].replace("%", "%%")
        fmt += {"str": "%s", "int": "%d", "float": "%v"}[probe.kind]
        args.append(
            {"str": probe.source, "int": f"(int64 {probe.source})"}.get(
                probe.kind, f"(float64 {probe.source})"
            )
        )
        at = end
    fmt += value[at:].replace("%", "%%")
    return Expr(f"printf {json.dumps(fmt)} {' '.join(args)} | toJson")


def _expand_each(items: list[Any], probe: EachProbe) -> list[Any]:
    # Items holding both elements repeat something deeper down (an args list inside a
    # Deployment): the range is found there.
    a, b = probe.texts
    first = [i for i, item in enumerate(items) if _contains(item, a) and not _contains(item, b)]
    if not first:
        return items
    second = [i for i, item in enumerate(items) if _contains(item, b) and not _contains(item, a)]
    n = len(first)
    start = first[0]
    if first != list(range(start, start + n)) or second != list(range(start + n, start + 2 * n)):
        raise ValueError(
            f"the items rendered for {probe.source} are not one block per element "
            f"(items {first} and {second}): no range can template them"
        )
    block = items[start : start + n]
    if _replace(block, probe.texts[0], probe.texts[1]) != items[start + n : start + 2 * n]:
        raise ValueError(f"the items rendered for the elements of {probe.source} differ")
    body = templatize(block, [ScalarProbe(probe.texts[0], probe.var)])
    return [*items[:start], Range(probe.var, probe.source, tuple(body)), *items[start + 2 * n :]]


def templatize(node: Any, probes: Sequence[Probe]) -> Any:
    """``node`` with every probe replaced by the template that reads its value."""
    scalars = [p for p in probes if isinstance(p, ScalarProbe)]
    wholes = [p for p in probes if isinstance(p, WholeProbe)]
    each = [p for p in probes if isinstance(p, EachProbe)]

    def walk(node: Any) -> Any:
        for whole in wholes:
            if node == whole.value:
                return Block(whole.source)
        if isinstance(node, dict):
            return {_substitute(k, scalars): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            items = list(node)
            for ranged in each:
                items = _expand_each(items, ranged)
            return [i if isinstance(i, Range) else walk(i) for i in items]
        return _substitute(node, scalars)

    return walk(node)


def leftover_probe(node: Any, probes: Sequence[Probe], path: str = "") -> str | None:
    """The path of a probe text still in ``node``, or None."""
    texts = [p.text for p in probes if isinstance(p, ScalarProbe)]
    texts += [t for p in probes if isinstance(p, EachProbe) for t in p.texts]

    def find(node: Any, path: str) -> str | None:
        if isinstance(node, dict):
            for key, value in node.items():
                found = find(key, path) or find(value, f"{path}.{key}")
                if found:
                    return found
        elif isinstance(node, list | tuple):
            for index, value in enumerate(node):
                found = find(value, f"{path}[{index}]")
                if found:
                    return found
        elif isinstance(node, Range):
            return find(node.items, path)
        elif isinstance(node, str):
            for text in texts:
                if text in node:
                    return f"{path} ({node!r} holds {text!r})"
        return None

    return find(node, path)
