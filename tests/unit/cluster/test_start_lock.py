"""Two cluster creations never overlap (``cluster.local.start_lock``): kwokctl picks its
ports by probing, so two at once pick the same ones."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cluster.local import start_lock


def test_a_second_creation_waits_until_the_first_is_done(tmp_path: Path) -> None:
    lock = tmp_path / "start.lock"
    spans: list[tuple[str, float, float]] = []

    def create(name: str) -> None:
        with start_lock(lock):
            began = time.monotonic()
            time.sleep(0.3)
            spans.append((name, began, time.monotonic()))

    threads = [threading.Thread(target=create, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (_, _, first_end), (_, second_start, _) = sorted(spans, key=lambda s: s[1])
    assert second_start >= first_end, spans
