"""cluster/cache.mk: a cached step built by two runs at once (two checkouts sharing one
``KUBETRAIN_CACHE``) ends with one complete directory and both runs succeeding; a dead
run's leftovers and a directory of the old in-place layout are cleaned up."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT

# A step that writes its files over a second, so that two runs overlap for sure.
MAKEFILE = """\
include {cache_mk}
$(OUT)/.done:
\t$(call cache_begin,$(OUT))
\t@echo one > $(call cache_partial,$(OUT))/a; sleep 1; echo two > $(call cache_partial,$(OUT))/b
\t@test "$$(cat $(call cache_partial,$(OUT))/a)" = one
\t$(call cache_publish,$(OUT))
"""


def _makefile(tmp_path: Path) -> Path:
    path = tmp_path / "Makefile"
    path.write_text(MAKEFILE.format(cache_mk=REPO_ROOT / "cluster" / "cache.mk"))
    return path


def _make(makefile: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["make", "--no-print-directory", "-f", str(makefile), f"OUT={out}", f"{out}/.done"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_runs_of_one_step_at_once_both_succeed_with_one_complete_result(
    tmp_path: Path,
) -> None:
    makefile, out = _makefile(tmp_path), tmp_path / "cache" / "tool-v1"
    out.parent.mkdir()
    runs = [_make(makefile, out), _make(makefile, out)]
    results = [(run.wait(timeout=60), run.stdout.read() if run.stdout else "") for run in runs]
    assert [code for code, _ in results] == [0, 0], results
    assert sorted(p.name for p in out.iterdir()) == [".done", "a", "b"]
    assert (out / "b").read_text() == "two\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["tool-v1"]  # no partial left
    kept = [text for _, text in results if "another run published it first" in text]
    assert len(kept) == 1, results


def test_a_dead_runs_leftover_goes_and_an_unfinished_old_layout_is_replaced(
    tmp_path: Path,
) -> None:
    makefile, out = _makefile(tmp_path), tmp_path / "tool-v1"
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = tmp_path / f"tool-v1.partial-{dead.pid}"
    leftover.mkdir()
    (leftover / "a").write_text("half\n")
    live = tmp_path / f"tool-v1.partial-{os.getpid()}"  # a run still going: left alone
    live.mkdir()
    out.mkdir()
    (out / "stale").write_text("built in place, never finished\n")
    run = _make(makefile, out)
    assert run.wait(timeout=60) == 0, run.stdout.read() if run.stdout else ""
    assert sorted(p.name for p in out.iterdir()) == [".done", "a", "b"]
    assert not leftover.exists()
    assert live.exists()
