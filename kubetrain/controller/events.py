"""Events about jobs (and runtimes), recorded by a background thread.

Events are queued (a bounded queue: when it is full an Event is dropped with a log
line, never a reconcile blocked) and sent at most ``event_qps`` per second (bursts of
10x) through a rate limiter of their own, as client-go's event broadcaster has a client
of its own: Events never take the reconciles' API budget, and the reconciles never hold
the Events back. A replica that cannot prove it still leads sends none. An Event with a
``name`` is recorded once per object, ever: a second create of that name is a no-op.

On shutdown, what is still queued is sent at once (Warnings first) for at most
``FLUSH_SECONDS``; whatever is left then is dropped and counted by reason in one log
line, so a SIGTERM hands over in seconds however long the queue.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller import reasons as R
from kubetrain.controller.conditions import format_time
from kubetrain.controller.decisions import Event
from kubetrain.controller.errors import ApiError, Deposed
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.ratelimit import TokenBucket

log = logging.getLogger("kubetrain.operator")

#: How long a stopping recorder keeps sending what is queued.
FLUSH_SECONDS = 1.0
_Queued = tuple[dict[str, Any], Event]


class EventRecorder:
    """Queues and sends core/v1 Events (see the module docs)."""

    def __init__(
        self,
        api: KubeApi,
        identity: str,
        may_write: Callable[[], bool],
        event_qps: float = 50.0,
    ) -> None:
        self.api = api
        self.identity = identity
        self._may_write = may_write
        self._events: queue.Queue[_Queued | None] = queue.Queue(maxsize=10000)
        self._stopping = threading.Event()
        # A wait for a token ends early when the recorder stops (then it flushes).
        burst = max(1, int(event_qps * 10))
        self._limiter = TokenBucket(event_qps, burst, sleep=self._stopping.wait)
        self._thread: threading.Thread | None = None
        self._flush_until = 0.0
        #: Events dropped at shutdown (the flush ran out of time), by reason.
        self.dropped: Counter[str] = Counter()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._send, name="event-recorder", daemon=True)
        self._thread.start()

    def stop(self, flush_seconds: float = FLUSH_SECONDS) -> None:
        """Send what is queued for at most ``flush_seconds``, drop the rest, stop."""
        self._flush_until = time.monotonic() + flush_seconds
        self._stopping.set()
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(timeout=flush_seconds + 1)

    def emit(self, raw: Mapping[str, Any], event: Event) -> None:
        """Queue an Event about ``raw`` (dropped when the queue is full)."""
        try:
            self._events.put_nowait((_reference(raw), event))
        except queue.Full:
            log.warning("event queue full, dropping event", extra={"reason": event.reason})

    def _send(self) -> None:
        while True:
            item = self._events.get()
            if self._stopping.is_set():
                self._flush([item] if item is not None else [])
                return
            if item is not None:
                self._deliver(*item, limiter=self._limiter)

    def _flush(self, first: list[_Queued]) -> None:
        """Shutdown: the rest of the queue at once, Warnings first, until the deadline."""
        pending = first
        while True:
            try:
                item = self._events.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                pending.append(item)
        pending.sort(key=lambda queued: queued[1].type != "Warning")  # stable
        unlimited = TokenBucket(1e9, 10**9)
        for index, (involved, event) in enumerate(pending):
            if time.monotonic() > self._flush_until:
                self.dropped.update(e.reason for _, e in pending[index:])
                log.warning(
                    "stopping: dropped queued events",
                    extra={"dropped": len(pending) - index, "reasons": dict(self.dropped)},
                )
                return
            self._deliver(involved, event, limiter=unlimited)

    def _deliver(self, involved: dict[str, Any], event: Event, *, limiter: TokenBucket) -> None:
        if not self._may_write():
            return  # a deposed leader records nothing
        try:
            self.api.create(self._object(involved, event), limiter=limiter)
        except Deposed:
            return  # deposed while it waited for a token: the API client refused it
        except ApiError as err:
            if err.status == 409 and event.name:
                return  # a once-only Event, recorded before
            log.warning("could not record event", extra={"error": str(err)})

    def _object(self, involved: dict[str, Any], event: Event) -> dict[str, Any]:
        now = format_time(datetime.now().astimezone())
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                # A named Event is recorded once per job, even across restarts.
                "name": f"{involved['name']}.{event.name or secrets.token_hex(8)}",
                "namespace": involved["namespace"],
            },
            "involvedObject": involved,
            "reason": event.reason,
            "message": R.truncate(event.message),
            "type": event.type,
            "source": {"component": "kubetrain-operator"},
            "reportingComponent": K.MANAGED_BY_KUBETRAIN,
            "reportingInstance": self.identity,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }


def _reference(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The Event's ``involvedObject``: taken when the Event is queued, so a queue of
    thousands of Events (sent at ``event_qps``) holds these few strings, not every old
    version of the jobs they are about (a 1,000-job burst queued that much)."""
    meta = raw.get("metadata") or {}
    return {
        "apiVersion": raw.get("apiVersion"),
        "kind": raw.get("kind"),
        "name": meta.get("name"),
        "namespace": str(meta.get("namespace") or "default"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
