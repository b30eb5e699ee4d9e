"""``kubetrain operator`` refuses what it cannot do, saying so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.cli import main


def test_rejects_a_bad_flag_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["operator", "--workers=0"]) == 2
    assert "workers (0) must be between 1 and 64" in capsys.readouterr().err


def test_rejects_gang_scheduling_it_does_not_implement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    code = main(["operator", f"--kubeconfig={kubeconfig}", "--gang-scheduler=volcano"])
    assert code == 2
    assert "gang_scheduler (volcano) is not supported" in capsys.readouterr().err
