"""The ``local`` stack's chart export, which ``test_chart.py`` compares with the committed
chart: from the content-keyed cache (``tests/charts.py``) or, when its sources changed,
exported in a process of its own (``tests/ahead.py``) as soon as the session has
collected that module: it takes a core for most of a minute, while the tests before it
run."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.gitops.stack import load_stacks
from tests.ahead import Ahead
from tests.charts import exported_files

ROOT = Path(__file__).resolve().parents[4]
_EXPORT = pytest.StashKey[Ahead[dict[str, str]]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    here = Path(__file__).parent
    if any(
        item.path.parent == here and item.path.name == "test_chart.py" for item in session.items
    ):
        session.config.stash[_EXPORT] = Ahead(exported_files, load_stacks(root=ROOT)["local"])


def pytest_unconfigure(config: pytest.Config) -> None:
    export = config.stash.get(_EXPORT, None)
    if export is not None:
        export.stop()


@pytest.fixture(scope="session")
def local_chart_files(request: pytest.FixtureRequest) -> dict[str, str]:
    """Every file of the ``local`` stack's chart (``chart_files``), by path."""
    export = request.config.stash.get(_EXPORT, None)
    if export is None:  # test_chart.py was not collected when the session started
        return exported_files(load_stacks(root=ROOT)["local"])
    return export.result()
