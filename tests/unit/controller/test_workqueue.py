"""The work queue's guarantees (client-go's): coalescing, one worker per key, delayed
and rate-limited adds."""

from __future__ import annotations

import threading

from kubetrain.controller.workqueue import WorkQueue


def test_a_key_added_twice_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert queue.get(timeout=1) == "a"
    assert queue.get(timeout=1) == "b"
    assert queue.get(timeout=0.01) is None
    queue.shutdown()


def test_a_key_is_not_handed_out_while_being_processed() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert queue.get(timeout=1) == "a"
    queue.add("a")  # changed while a worker holds it
    assert queue.get(timeout=0.01) is None  # not given to a second worker
    queue.done("a")
    assert queue.get(timeout=1) == "a"  # processed again afterwards
    queue.done("a")
    assert len(queue) == 0
    queue.shutdown()


def test_add_after_delivers_later_and_keeps_the_earliest_time() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("late", 0.3)
    queue.add_after("late", 30)  # a later schedule does not postpone it
    queue.add_after("soon", 0.05)
    assert queue.pending() == 2 and len(queue) == 0
    assert queue.get(timeout=5) == "soon"
    assert queue.get(timeout=5) == "late"
    queue.shutdown()


def test_rate_limited_adds_back_off_exponentially_until_forgotten() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.05)
    delays = [queue.add_rate_limited("k") for _ in range(5)]
    assert delays == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert queue.failures("k") == 5
    queue.forget("k")
    assert queue.failures("k") == 0
    assert queue.add_rate_limited("k") == 0.01
    queue.shutdown()


def test_shutdown_releases_blocked_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get()))
    worker.start()
    queue.shutdown()
    worker.join(timeout=5)
    assert not worker.is_alive() and got == [None]
    queue.add("ignored")
    assert len(queue) == 0
