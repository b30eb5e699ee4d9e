"""Project-wide test settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.operator.process import OperatorProcess

# jsii (under cdk8s) prints a Node.js end-of-life banner unless told the major version.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"


# -- figures ------------------------------------------------------------------------------
# Tests that measure something (handover times, a small job's wait, fault counts) record
# one line each here; the lines are printed at the end of the run, after the results, so
# `make test` shows the figures without ``-s``. Nothing asserts on them.

_FIGURES = pytest.StashKey[list[str]]()


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> list[str]:
    """Append ``"what: value"`` lines; they are printed in the run's summary."""
    return request.config.stash.setdefault(_FIGURES, [])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(_FIGURES, [])
    if not lines:
        return
    terminalreporter.write_sep("-", "figures measured by the tests")
    for line in lines:
        terminalreporter.write_line(line)


@pytest.fixture
def processes() -> Iterator[list[OperatorProcess]]:
    """Operator processes a test starts (append them); killed at its end."""
    started: list[OperatorProcess] = []
    yield started
    for proc in started:
        proc.stop()
