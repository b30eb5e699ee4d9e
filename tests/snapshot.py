"""Snapshot assertions: compare text with a committed file; ``UPDATE_SNAPSHOTS=1`` rewrites
the file instead (review the diff, then commit it)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

SNAPSHOT_DIR = Path(__file__).parent / "snapshots" / "data"


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOT_DIR / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no snapshot {path}: run with UPDATE_SNAPSHOTS=1 and commit it"
    expected = path.read_text()
    if expected != text:
        diff = "".join(
            list(
                difflib.unified_diff(
                    expected.splitlines(True),
                    text.splitlines(True),
                    f"{name} (snapshot)",
                    f"{name} (now)",
                )
            )[:80]
        )
        raise AssertionError(
            f"{name} differs from its snapshot (UPDATE_SNAPSHOTS=1 to accept):\n{diff}"
        )
