"""The real ``cdk8s synth`` (the npm CLI, which ``make test`` installs: not in the unit
tier, which needs nothing but the venv) writes what ``kubetrain synth`` writes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.unit.gitops.test_synth_cli import run, tree


def test_real_cdk8s_cli_writes_what_kubetrain_synth_writes(tmp_path: Path) -> None:
    cli = os.environ.get("KUBETRAIN_CDK8S_CLI", "")
    assert cli and Path(cli).exists(), "the cdk8s CLI is missing: run `make cdk8s-cli`"
    via_cdk8s, via_kubetrain = tmp_path / "cdk8s", tmp_path / "kubetrain"
    result = subprocess.run(
        [cli, "synth", "--output", str(via_cdk8s)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        run("synth", "--out", str(via_kubetrain), "--root", str(REPO_ROOT), cwd=tmp_path).returncode
        == 0
    )
    assert tree(via_cdk8s) == tree(via_kubetrain)
    assert len(tree(via_cdk8s)) > 50
