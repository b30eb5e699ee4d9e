"""A pytest plugin that measures what a test process spends outside its tests: the setup
and teardown of every session-, package- and module-scoped fixture, and how many
operators the tests started. ``python -m tests.tiers`` names the file to write in
``KUBETRAIN_TEST_TIMING``; without it nothing is written.

Operators count wherever they start (``count_operator_start``): the in-process
``RunningOperator`` and the ``OperatorProcess`` subprocess alike. (PYTEST_DONT_REWRITE:
the operator helpers import it before pytest loads it as a plugin; it asserts nothing.)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

TIMING_ENV = "KUBETRAIN_TEST_TIMING"
_WIDE_SCOPES = ("session", "package", "module")

_fixtures: list[dict[str, Any]] = []
_teardown_started: dict[int, float] = {}
_operator_starts = [0]
_starts_by_test: dict[str, int] = {}


def count_operator_start() -> None:
    """Called by every operator the tests start; the test that started it is kept too
    (pytest names it in ``PYTEST_CURRENT_TEST``: "path::test (setup)")."""
    _operator_starts[0] += 1
    test = os.environ.get("PYTEST_CURRENT_TEST", "(outside a test)").rsplit(" (", 1)[0]
    _starts_by_test[test] = _starts_by_test.get(test, 0) + 1


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, None]:
    if fixturedef.scope not in _WIDE_SCOPES:
        yield
        return
    began = time.monotonic()
    yield
    record = {
        "name": fixturedef.argname,
        "scope": fixturedef.scope,
        "setup": round(time.monotonic() - began, 2),
        "teardown": 0.0,
    }
    _fixtures.append(record)
    key = id(fixturedef)
    # Finalizers run last-in first-out: this one runs before the fixture's own teardown.
    fixturedef.addfinalizer(lambda: _teardown_started.__setitem__(key, time.monotonic()))
    _records[key] = record


_records: dict[int, dict[str, Any]] = {}


def pytest_fixture_post_finalizer(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> None:
    key = id(fixturedef)
    began = _teardown_started.pop(key, None)
    record = _records.pop(key, None)
    if began is not None and record is not None:
        record["teardown"] = round(time.monotonic() - began, 2)


def pytest_unconfigure(config: pytest.Config) -> None:
    target = os.environ.get(TIMING_ENV)
    if not target:
        return
    # A pytest-xdist worker writes a file of its own beside its controller's.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    Path(f"{target}.{worker}" if worker else target).write_text(
        json.dumps(
            {
                "fixtures": _fixtures,
                "operator_starts": _operator_starts[0],
                "operator_starts_by_test": _starts_by_test,
            },
            indent=1,
        )
    )
