"""Condition rules shared with upstream (training-operator pkg/util/status.go)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kubetrain.api.common import ConditionStatus as S
from kubetrain.api.common import ConditionType as T
from kubetrain.api.common import JobCondition
from kubetrain.controller import conditions as C
from tests.builders.observed import NOW

LATER = NOW + timedelta(seconds=5)


def types(conds: list[JobCondition]) -> list[tuple[str, str]]:
    return [(c.type.value, c.status.value) for c in conds]


def test_a_new_condition_is_appended_last() -> None:
    conds = C.set_condition([], T.CREATED, S.TRUE, "JobCreated", "created", NOW)
    conds = C.set_condition(conds, T.RUNNING, S.TRUE, "JobRunning", "running", LATER)
    assert types(conds) == [("Created", "True"), ("Running", "True")]
    assert conds[-1].last_transition_time == C.format_time(LATER)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param(
            T.RUNNING,
            T.RESTARTING,
            [("Created", "True"), ("Restarting", "True")],
            id="restarting-replaces-running",
        ),
        pytest.param(
            T.RESTARTING,
            T.RUNNING,
            [("Created", "True"), ("Running", "True")],
            id="running-replaces-restarting",
        ),
        pytest.param(
            T.RUNNING,
            T.SUCCEEDED,
            [("Created", "True"), ("Running", "False"), ("Succeeded", "True")],
            id="succeeded-turns-running-false",
        ),
        pytest.param(
            T.RUNNING,
            T.FAILED,
            [("Created", "True"), ("Running", "False"), ("Failed", "True")],
            id="failed-turns-running-false",
        ),
    ],
)
def test_transitions(first: T, second: T, expected: list[tuple[str, str]]) -> None:
    conds = C.set_condition([], T.CREATED, S.TRUE, "C", "c", NOW)
    conds = C.set_condition(conds, first, S.TRUE, "A", "a", NOW)
    conds = C.set_condition(conds, second, S.TRUE, "B", "b", LATER)
    assert types(conds) == expected


def test_an_unchanged_condition_is_not_touched() -> None:
    conds = C.set_condition([], T.RUNNING, S.TRUE, "R", "m", NOW)
    again = C.set_condition(conds, T.RUNNING, S.TRUE, "R", "m", LATER)
    assert again == conds


def test_a_new_message_updates_in_place_without_a_transition() -> None:
    conds = C.set_condition([], T.CREATED, S.TRUE, "C", "c", NOW)
    conds = C.set_condition(conds, T.RUNNING, S.TRUE, "R", "m", NOW)
    conds = C.set_condition(conds, T.CREATED, S.TRUE, "C", "c, waiting", LATER)
    assert types(conds) == [("Created", "True"), ("Running", "True")]
    assert conds[0].message == "c, waiting"
    assert conds[0].last_transition_time == C.format_time(NOW)
    assert conds[0].last_update_time == C.format_time(LATER)


def test_set_false_keeps_the_position() -> None:
    conds = C.set_condition([], T.RUNNING, S.TRUE, "R", "m", NOW)
    conds = C.set_condition(conds, T.SUSPENDED, S.TRUE, "S", "s", NOW)
    conds = C.set_false(conds, T.RUNNING, "Suspended", "stopped", LATER)
    assert types(conds) == [("Running", "False"), ("Suspended", "True")]
    assert C.set_false(conds, T.RESTARTING, "x", "y", LATER) == conds


def test_finished_and_time_helpers() -> None:
    conds = C.set_condition([], T.FAILED, S.TRUE, "F", "f", NOW)
    from kubetrain.api.common import JobStatus

    assert C.finished(JobStatus(conditions=conds)) is T.FAILED
    assert C.finished(JobStatus()) is None
    assert C.parse_time(C.format_time(NOW)) == NOW
    assert C.parse_time("yesterday") is None
