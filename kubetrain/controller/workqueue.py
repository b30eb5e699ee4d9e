"""A rate-limited work queue of job keys, with client-go's guarantees:

- a key is queued at most once however often it is added (events coalesce);
- a key is never handed to two workers at once: added while being processed, it is
  queued again when the worker calls ``done``;
- ``add_after`` schedules a key for later (deadlines and TTLs fire on time), keeping
  the earliest time when scheduled twice;
- ``add_rate_limited`` retries a failing key with per-key exponential backoff, reset
  by ``forget``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Thread-safe; ``get`` blocks until a key is ready or the queue shuts down."""

    def __init__(
        self,
        *,
        base_delay: float = 0.005,
        max_delay: float = 300.0,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        #: Called with the seconds a key waited in the queue each time a worker takes it.
        self.on_wait = on_wait
        self._queued_at: dict[K, float] = {}
        self._cond = threading.Condition()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: list[tuple[float, int, K]] = []
        self._scheduled: dict[K, float] = {}
        self._failures: dict[K, int] = {}
        self._counter = itertools.count()
        self._shutdown = False
        self._timer = threading.Thread(target=self._run_timer, name="workqueue-timer", daemon=True)
        self._timer.start()

    def __len__(self) -> int:
        """Keys ready to be processed (the queue depth)."""
        with self._cond:
            return len(self._queue)

    def pending(self) -> int:
        """Keys ready plus keys scheduled for later."""
        with self._cond:
            return len(self._queue) + len(self._scheduled)

    def add(self, key: K) -> None:
        """Queue ``key`` now (no-op when already queued)."""
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        self._queued_at.setdefault(key, time.monotonic())
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify_all()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` in ``delay`` seconds (at once when <= 0)."""
        if delay <= 0:
            self.add(key)
            return
        due = time.monotonic() + delay
        with self._cond:
            if self._shutdown:
                return
            current = self._scheduled.get(key)
            if current is not None and current <= due:
                return
            self._scheduled[key] = due
            heapq.heappush(self._waiting, (due, next(self._counter), key))
            self._cond.notify_all()

    def add_rate_limited(self, key: K) -> float:
        """Add ``key`` after its backoff (doubling per failure); returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = min(self.base_delay * float(2 ** min(failures, 30)), self.max_delay)
        self.add_after(key, delay)
        return delay

    def failures(self, key: K) -> int:
        """How many times ``key`` was re-added with backoff since it was forgotten."""
        with self._cond:
            return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (call after a successful reconcile)."""
        with self._cond:
            self._failures.pop(key, None)

    def get(self, timeout: float | None = None) -> K | None:
        """The next key (now owned by the caller until ``done``), or None on shutdown
        or timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue:
                if self._shutdown:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            key = self._queue.popleft()
            self._processing.add(key)
            self._dirty.discard(key)
            queued_at = self._queued_at.pop(key, None)
        if self.on_wait is not None and queued_at is not None:
            self.on_wait(time.monotonic() - queued_at)
        return key

    def done(self, key: K) -> None:
        """The worker finished ``key``; it is queued again if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify_all()

    def shutdown(self) -> None:
        """Stop handing out keys; blocked ``get`` calls return None."""
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
        self._timer.join(timeout=2)

    @property
    def is_shutdown(self) -> bool:
        """Whether ``shutdown`` was called."""
        with self._cond:
            return self._shutdown

    def _run_timer(self) -> None:
        with self._cond:
            while not self._shutdown:
                now = time.monotonic()
                while self._waiting and self._waiting[0][0] <= now:
                    due, _, key = heapq.heappop(self._waiting)
                    if self._scheduled.get(key) == due:
                        del self._scheduled[key]
                        self._add_locked(key)
                wait = self._waiting[0][0] - now if self._waiting else None
                self._cond.wait(wait)
