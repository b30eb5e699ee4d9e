"""Project-wide test settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.operator.process import OperatorProcess
from tests.integration.operator.running import SharedOperator
from tests.profiles import NO_CLUSTER, profile_of
from tests.tiers import BY_NAME, TIERS, tier_of_path

# The control planes' fixtures and helm's (every directory's tests may use them) and the
# timing of fixtures and operator starts (``tests/timing.py``).
pytest_plugins = ["tests.clusters", "tests.charts", "tests.timing"]

# jsii (under cdk8s) prints a Node.js end-of-life banner unless told the major version.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"


# -- tiers and profiles ------------------------------------------------------------------
# Each test is marked with its tier, from its directory (``tests/tiers.py``), so that
# ``pytest -m cluster`` works; ``--tier`` and ``--profile`` are how ``python -m
# tests.tiers`` hands each process its share: a process keeps the tests of its profiles.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=sorted(BY_NAME),
        help="the tier this process runs (tests/tiers.py): a test outside it is an error",
    )
    parser.addoption(
        "--profile",
        help=(
            "comma-separated cluster profiles (tests/profiles.py; 'none': tests without a "
            "control plane) whose tests this process runs; the others are deselected"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG[:] = [config]
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier.name}: {tier.help} (tests/tiers.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier_name = config.getoption("--tier")
    profiles = config.getoption("--profile")
    wanted = set(profiles.split(",")) if profiles else None
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        relative = item.path.relative_to(REPO_ROOT).as_posix()
        tier = tier_of_path(relative)
        if tier is None:
            raise pytest.UsageError(f"{relative} is in no tier's directories (tests/tiers.py)")
        item.add_marker(tier.name)
        if tier_name is not None and tier.name != tier_name:
            raise pytest.UsageError(f"{relative} is in tier {tier.name}, not {tier_name}")
        try:
            profile = profile_of(getattr(item, "fixturenames", ()))
        except ValueError as err:
            raise pytest.UsageError(f"{item.nodeid}: {err}") from None
        if tier_name is not None and profile not in (tier.profiles() | {NO_CLUSTER}):
            raise pytest.UsageError(
                f"{item.nodeid} needs profile {profile}, which tier {tier.name} does not run"
            )
        (keep if wanted is None or profile in wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    items[:] = shared_operator_first(items)


#: Where the tests are independent of their order and many share the operator.
SHARED_OPERATOR_TESTS = REPO_ROOT / "tests" / "integration" / "operator"


def shared_operator_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The operator's integration tests ordered so that the shared operator starts as few
    times as it can (a test without it stops it, and the next with it starts a new one):
    every test that shares it first, then those that do not. A module's tests are split
    between the two groups, each group in file order, unless the module has module-scoped
    fixtures (made once per stretch of its tests, so made again if its tests were apart):
    such a module with both kinds runs whole between the groups, its sharing tests first.
    Other directories keep pytest's order (some of their modules run in a set order)."""
    mine = [i for i in items if SHARED_OPERATOR_TESTS in i.path.parents]
    if not mine:
        return items
    modules: dict[Path, list[pytest.Item]] = {}
    for item in mine:
        modules.setdefault(item.path, []).append(item)

    def shares(item: pytest.Item) -> bool:
        return "operator" in getattr(item, "fixturenames", ())

    sharing: list[pytest.Item] = []
    whole: list[pytest.Item] = []
    private: list[pytest.Item] = []
    for tests in modules.values():
        kinds = {shares(t) for t in tests}
        if len(kinds) == 2 and _has_module_fixtures(tests):
            whole += sorted(tests, key=lambda t: not shares(t))
        else:
            sharing += [t for t in tests if shares(t)]
            private += [t for t in tests if not shares(t)]
    ordered = sharing + whole + private
    # The operator's tests run where their first one was (a process runs them together).
    moved = {id(i) for i in mine}
    at = items.index(mine[0])
    return items[:at] + ordered + [i for i in items[at:] if id(i) not in moved]


def _has_module_fixtures(tests: list[pytest.Item]) -> bool:
    for test in tests:
        info = getattr(test, "_fixtureinfo", None)
        for defs in info.name2fixturedefs.values() if info is not None else ():
            if defs and defs[-1].scope in ("module", "package", "class"):
                return True
    return False


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Under the tier runner, a failure is printed when it happens, not only at the end of
    its tier: a newcomer sees what broke while the rest of the tier still runs."""
    config = _CONFIG[0] if _CONFIG else None
    if config is None or config.getoption("--tier") is None or not report.failed:
        return
    if hasattr(config, "workerinput"):
        return  # a pytest-xdist worker: its controller gets the report and relays it
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    reporter.write_line("")
    reporter.write_sep("_", f"{report.when} of {report.nodeid} FAILED (its tier goes on)", red=True)
    reporter.write_line(report.longreprtext)
    # The runner relays it from here when this process's output goes to a log.
    relay = os.environ.get("KUBETRAIN_TEST_FAILURES")
    if relay:
        lines = report.longreprtext.splitlines()
        shown = lines if len(lines) <= RELAYED_LINES else ["...", *lines[-RELAYED_LINES:]]
        with open(relay, "a", encoding="utf-8") as out:
            out.write(f"{report.when} of {report.nodeid} FAILED\n" + "\n".join(shown) + "\n")


#: The last lines of a failure the runner prints as it happens (the log has it whole).
RELAYED_LINES = 40


_CONFIG: list[pytest.Config] = []


@pytest.fixture(autouse=True)
def _operator_exclusive(request: pytest.FixtureRequest) -> None:
    """Stop the shared operator (``tests/integration/operator/running.py``) before a test
    that does not use it: such a test may run an operator of its own, or none."""
    shared = SharedOperator.of(request.session)
    if shared is not None and "operator" not in request.fixturenames:
        shared.pause()


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
