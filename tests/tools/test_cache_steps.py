"""A real cached step built by two runs at once: two ``make`` of the kustomize tool into
one fresh ``KUBETRAIN_CACHE`` (the Go caches warm from the set-up, so each run compiles
nothing and links, a few seconds), as two checkouts' ``make test`` started together do.
Before cluster/cache.mk both built into one ``.partial`` directory and one removed the
other's half-built binary (seen with Trainer's e2e suite on a fresh machine)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT


def _tool_dir(cache: Path, tool: str) -> Path:
    out = subprocess.run(
        ["make", "--no-print-directory", "-s", "cluster-tool-dirs", f"KUBETRAIN_CACHE={cache}"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    dirs = dict(line.split(" ", 1) for line in out.splitlines())
    return Path(dirs[tool])


def test_two_checkouts_building_one_tool_at_once_both_get_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = _tool_dir(cache, "kustomize")
    assert target.is_relative_to(cache)
    env = dict(os.environ, KUBETRAIN_CACHE=str(cache))
    runs = [
        subprocess.Popen(
            ["make", "--no-print-directory", f"{target}/.done", f"KUBETRAIN_CACHE={cache}"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(run.wait(timeout=300), run.stdout.read() if run.stdout else "") for run in runs]
    assert [code for code, _ in results] == [0, 0], results
    assert (target / ".done").exists()
    version = subprocess.run(
        [str(target / "bin" / "kustomize"), "version"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert version.startswith("v5."), version
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no partial left
