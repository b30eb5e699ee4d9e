"""``kubetrain operator`` refuses what it cannot do, saying so."""

from __future__ import annotations

import pytest

from kubetrain.cli import main


def test_rejects_a_bad_flag_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operator", "--workers=0"]) == 2
    assert "workers (0) must be between 1 and 64" in capsys.readouterr().err


def test_rejects_a_gang_scheduler_name_without_a_gang_scheduler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["operator", "--gang-scheduler-name=gang"]) == 2
    assert "gang_scheduler_name (gang) needs a gang_scheduler" in capsys.readouterr().err
