"""Events about jobs (and runtimes), recorded by a background thread.

Events are queued (a bounded queue: when it is full an Event is dropped with a log
line, never a reconcile blocked), sent at most ``event_qps`` per second (bursts of 10x)
so a large job's per-pod Events wait their turn instead of taking the reconciles' API
budget, and never by a replica that cannot prove it still leads. An Event with a
``name`` is recorded once per object, ever: a second create of that name is a no-op.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
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


class EventRecorder:
    """Queues and sends core/v1 Events (see the module docs)."""

    def __init__(
        self,
        api: KubeApi,
        identity: str,
        may_write: Callable[[], bool],
        event_qps: float = 10.0,
    ) -> None:
        self.api = api
        self.identity = identity
        self._may_write = may_write
        self._events: queue.Queue[tuple[dict[str, Any], Event] | None] = queue.Queue(maxsize=10000)
        self._limiter = TokenBucket(event_qps, max(1, int(event_qps * 10)))
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._send, name="event-recorder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Send what is queued (within a few seconds), then stop."""
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def emit(self, raw: Mapping[str, Any], event: Event) -> None:
        """Queue an Event about ``raw`` (dropped when the queue is full)."""
        try:
            self._events.put_nowait((_reference(raw), event))
        except queue.Full:
            log.warning("event queue full, dropping event", extra={"reason": event.reason})

    def _send(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            involved, event = item
            self._limiter.acquire()
            if not self._may_write():
                continue  # a deposed leader records nothing
            try:
                self.api.create(self._object(involved, event))
            except Deposed:
                continue  # deposed while it waited for a token: the API client refused it
            except ApiError as err:
                if err.status == 409 and event.name:
                    continue  # a once-only Event, recorded before
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
