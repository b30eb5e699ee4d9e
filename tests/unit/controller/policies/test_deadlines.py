from __future__ import annotations

import pytest

from kubetrain.api.common import JobStatus, RunPolicy
from kubetrain.controller.policies import deadlines
from tests.builders.observed import NOW, stamp


@pytest.mark.parametrize(
    ("seconds", "started_ago", "due", "after"),
    [
        pytest.param(None, 100, False, None, id="no-deadline"),
        pytest.param(60, None, False, None, id="not-started"),
        pytest.param(60, 10, False, 50.05, id="requeue-when-due"),
        pytest.param(60, 60, True, None, id="due-now"),
        pytest.param(60, 600, True, None, id="overdue"),
    ],
)
def test_active_deadline(
    seconds: int | None, started_ago: float | None, due: bool, after: float | None
) -> None:
    status = JobStatus(start_time=stamp(started_ago) if started_ago is not None else None)
    result = deadlines.active_deadline(RunPolicy(active_deadline_seconds=seconds), status, NOW)
    assert result.due is due
    assert result.after == (pytest.approx(after) if after is not None else None)


@pytest.mark.parametrize(
    ("ttl", "finished_ago", "due"),
    [
        pytest.param(None, 1000, False, id="no-ttl"),
        pytest.param(30, None, False, id="not-finished"),
        pytest.param(30, 29, False, id="not-yet"),
        pytest.param(0, 0, True, id="zero-deletes-at-once"),
        pytest.param(30, 30, True, id="due"),
    ],
)
def test_ttl_after_finished(ttl: int | None, finished_ago: float | None, due: bool) -> None:
    status = JobStatus(completion_time=stamp(finished_ago) if finished_ago is not None else None)
    result = deadlines.ttl_after_finished(RunPolicy(ttl_seconds_after_finished=ttl), status, NOW)
    assert result.due is due
    if ttl is not None and finished_ago is not None and not due:
        assert result.after == pytest.approx(ttl - finished_ago + deadlines.SLACK_SECONDS)
