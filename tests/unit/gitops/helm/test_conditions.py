"""The chart's presence conditions say exactly where a node is: checked by evaluating
their text, as Helm's template functions would, on every combination of options, for
random patterns of presence (some combinations refused, which may go either way)."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.gitops.helm.conditions import Assignment, presence_condition

# Axes as the chart has them: booleans, a boolean whose first option is its negation, and
# a three-way choice with a final "else".
OPTIONS = (
    ("$.Values.a", None),
    ("$.Values.b", None),
    ("not $.Values.e", None),
    ('eq $.Values.g "x"', 'eq $.Values.g "y"', None),
)
ASSIGNMENTS = list(itertools.product(*(range(len(o)) for o in OPTIONS)))


def _facts(assignment: Assignment) -> dict[str, bool]:
    a, b, e, g = assignment
    gang = ("x", "y", "z")[g]
    return {
        "$.Values.a": a == 0,
        "$.Values.b": b == 0,
        "$.Values.e": e == 1,
        'eq $.Values.g "x"': gang == "x",
        'eq $.Values.g "y"': gang == "y",
    }


def _arguments(text: str) -> list[str]:
    """Top-level space-separated arguments, a parenthesised group counting as one."""
    parts: list[str] = []
    depth = 0
    current = ""
    for token in re.findall(r'"[^"]*"|\(|\)|[^\s()]+|\s+', text):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        if token.isspace() and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += token
    return [*parts, current]


def evaluate(text: str, facts: dict[str, bool]) -> bool:
    if text in facts:
        return facts[text]
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("(") and text.endswith(")"):
        return evaluate(text[1:-1], facts)
    operator, *operands = _arguments(text)
    values = [evaluate(o, facts) for o in operands]
    if operator == "not":
        (value,) = values
        return not value
    assert operator in ("and", "or"), text
    return all(values) if operator == "and" else any(values)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([True, False, None]), min_size=len(ASSIGNMENTS), max_size=len(ASSIGNMENTS)
    )
)
def test_a_condition_is_true_exactly_where_the_node_is(pattern: list[bool | None]) -> None:
    presence = {a: p for a, p in zip(ASSIGNMENTS, pattern, strict=True) if p is not None}
    if len(set(presence.values())) < 2:
        return  # always there, never there, or nothing rendered: no condition is asked for
    text = presence_condition(presence, OPTIONS)
    for assignment, present in presence.items():
        assert evaluate(text, _facts(assignment)) == present, (text, assignment)


def test_a_simple_pattern_reads_simply() -> None:
    either = {a: a[0] == 0 or a[1] == 0 for a in ASSIGNMENTS}
    assert presence_condition(either, OPTIONS) == "or $.Values.a $.Values.b"
    not_gang_x = {a: a[3] != 0 and a[2] == 1 for a in ASSIGNMENTS}
    assert presence_condition(not_gang_x, OPTIONS) == 'and $.Values.e (not (eq $.Values.g "x"))'
