"""The Helm condition under which a templated node is there, found from the renders.

A node (an object, a rule of a Role) that some combinations of the axes' options render
and others do not is written once, behind one ``{{- if <condition> }}``. The condition is
found from where the node is and is not: first the shorter of an ``and`` of clauses and
an ``or`` of terms, each naming at most three options, chosen greedily, that says
exactly that on every combination rendered, so a rule reads ``if or
$.Values.kinds.MPIJob $.Values.kinds.TrainJob``. Combinations never rendered (values
the constructs refuse) may go either way. Failing those, a decision over the axes one
at a time, always exact, only longer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

Assignment = tuple[int, ...]
"""One option chosen per axis, by index."""

Options = Sequence[Sequence[str | None]]
"""Per axis, its options' Helm conditions (None: what the options before it do not select)."""

Condition = bool | str | tuple[Any, ...]
"""True, False, a condition's text, or ("and" | "or" | "not", operands...)."""


def option_condition(options: Options, axis: int, choice: int) -> Condition:
    """The condition that selects ``choice`` of ``axis``."""
    condition = options[axis][choice]
    if condition is not None:
        return condition
    earlier = [c for c in options[axis][:choice] if c is not None]
    return negate(earlier[0] if len(earlier) == 1 else ("or", *earlier))


def negate(condition: Condition) -> Condition:
    if isinstance(condition, bool):
        return not condition
    if isinstance(condition, tuple) and condition[0] == "not":
        inner: Condition = condition[1]
        return inner
    if isinstance(condition, str) and condition.startswith("not ") and " " not in condition[4:]:
        return condition[4:]
    return ("not", condition)


def presence_condition(presence: dict[Assignment, bool], options: Options) -> str:
    """The text of a condition true on every assignment where ``presence`` says the node
    is there and false where it says it is not."""
    return text(_simple(presence, options) or _decide(presence, options))


def _simple(presence: dict[Assignment, bool], options: Options) -> Condition | None:
    """The shorter of an ``and`` of ``or`` clauses and an ``or`` of ``and`` terms, each of
    at most three options, picked greedily; None when neither says it exactly."""
    order = list(presence)
    full = (1 << len(order)) - 1
    want = sum(1 << i for i, a in enumerate(order) if presence[a])
    literals: list[tuple[int, Condition]] = []
    for axis, conditions in enumerate(options):
        for choice in range(len(conditions)):
            mask = sum(1 << i for i, a in enumerate(order) if a[axis] == choice)
            if mask in (0, full):
                continue  # every rendered combination has it (or none): says nothing
            literals.append((mask, option_condition(options, axis, choice)))
            if len(conditions) > 2:
                literals.append((full & ~mask, negate(option_condition(options, axis, choice))))
    groups = [c for size in (1, 2, 3) for c in itertools.combinations(literals, size)]
    clauses = []  # true wherever the node is: each rules out where it is not
    terms = []  # true only where the node is: each covers some of it
    for group in groups:
        any_of = 0
        all_of = full
        for mask, _ in group:
            any_of |= mask
            all_of &= mask
        if any_of & want == want:
            clauses.append((full & ~any_of, tuple(c for _, c in group)))
        if all_of & ~want & full == 0:
            terms.append((all_of, tuple(c for _, c in group)))
    found = [
        f
        for f in (_cover(full & ~want, clauses, "and", "or"), _cover(want, terms, "or", "and"))
        if f is not None
    ]
    return min(found, key=lambda f: len(text(f))) if found else None


def _cover(
    bits: int, parts: list[tuple[int, tuple[Condition, ...]]], outer: str, inner: str
) -> Condition | None:
    """Parts picked greedily (most of what is left per option named) until their masks
    cover ``bits``; joined by ``outer``, each part's options by ``inner``."""
    chosen: list[tuple[Condition, ...]] = []
    left = bits
    while left:
        best = max(parts, key=lambda p: (bin(p[0] & left).count("1") / len(p[1]), -len(p[1])))
        if not best[0] & left:
            return None
        chosen.append(best[1])
        left &= ~best[0]
    joined = [c[0] if len(c) == 1 else (inner, *c) for c in chosen]
    if not joined:
        return outer == "and"
    return joined[0] if len(joined) == 1 else (outer, *joined)


def _decide(presence: dict[Assignment, bool], options: Options) -> Condition:
    """Exact: split on the first axis that varies, each option's part decided alike."""
    if all(presence.values()):
        return True
    if not any(presence.values()):
        return False
    axis = next(i for i in range(len(options)) if len({a[i] for a in presence}) > 1)
    inner = {
        choice: _decide({a: p for a, p in presence.items() if a[axis] == choice}, options)
        for choice in sorted({a[axis] for a in presence})
    }
    first = next(iter(inner.values()))
    if all(c == first for c in inner.values()):
        return first  # this axis does not matter here
    terms = [_and(option_condition(options, axis, c), inner[c]) for c in inner]
    kept = [t for t in terms if t is not False]
    return kept[0] if len(kept) == 1 else ("or", *kept)


def _and(left: Condition, right: Condition) -> Condition:
    if right is True:
        return left
    if right is False:
        return False
    return ("and", left, right)


def text(condition: Condition, nested: bool = False) -> str:
    """A condition as Helm template text (operands in parentheses where they need them)."""
    if isinstance(condition, bool):
        out = "true" if condition else "false"
    elif isinstance(condition, str):
        out = condition
    else:
        operator, *operands = condition
        flat = [
            inner
            for operand in operands
            for inner in (
                operand[1:]
                if operator != "not" and isinstance(operand, tuple) and operand[0] == operator
                else (operand,)
            )
        ]
        out = " ".join([operator, *(text(o, nested=True) for o in flat)])
    return f"({out})" if nested and " " in out else out
