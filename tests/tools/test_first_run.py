"""The first README command on a fresh clone: ``make synth`` says what it does and nothing
else (no packaging warnings from the editable install), and a second run only synthesizes.

The tree is copied as a clone would have it (tracked and untracked, not ignored, files),
with no virtualenv, so ``make synth`` creates ``.venv`` and installs kubetrain the way a
newcomer's first run does (packages come from pip's cache when it is warm).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT

#: What a newcomer may see, each line matched by its start.
FIRST_RUN_LINES = (
    "Setting up .venv: kubetrain and its dev tools",
    ".venv ready",
    "local 0.1.0: ",
)
#: Words that mean a tool complained.
NOISE = ("warning", "deprecat", "!!", "error", "traceback")


def _copy_tree(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if not source.is_file():  # deleted in the work tree, not yet committed
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _make_synth(tree: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    done = subprocess.run(
        ["make", "synth"],
        cwd=tree,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = (done.stdout + done.stderr).splitlines()
    assert done.returncode == 0, "\n".join(output[-40:])
    return [line for line in output if line.strip() and not line.startswith("make")]


def test_make_synth_on_a_fresh_clone_prints_only_what_it_does(tmp_path: Path) -> None:
    tree = tmp_path / "kubetrain"
    _copy_tree(tree)
    assert not (tree / ".venv").exists()

    first = _make_synth(tree)
    noisy = [line for line in first if any(word in line.lower() for word in NOISE)]
    assert noisy == [], "\n".join(first)
    assert len(first) == len(FIRST_RUN_LINES), "\n".join(first)
    for line, start in zip(first, FIRST_RUN_LINES, strict=True):
        assert line.startswith(start), f"expected a line starting {start!r}, got {line!r}"
    assert (tree / "dist" / "local" / "0.1.0").is_dir()

    again = _make_synth(tree)
    assert len(again) == 1 and again[0].startswith("local 0.1.0: "), "\n".join(again)
