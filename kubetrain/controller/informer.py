"""Informers: a local cache of one resource kept current by list + watch.

- The watch resumes from the last resourceVersion seen (bookmarks included); on
  410 Gone (the version expired) the informer lists again and reports only the
  differences, so handlers see every change exactly as if the watch had not broken.
- Objects pass through a ``transform`` before they are stored (``controller/trim.py``:
  children keep only the fields the operator reads), so memory grows with the jobs, not
  with the cluster; the child watches are label-filtered too.
- Writes the operator makes are put into the cache at once (``upsert`` / ``mark_deleted``)
  so the next reconcile does not act on stale state; a watch event older than what the
  cache holds is ignored, and the echo of our own write does not wake the job again;
  neither does a new version whose transformed object is unchanged (a pod's condition
  timestamps, say, which the transform drops): the cache takes its resourceVersion only.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, Protocol

from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import Resource, WatchEvent

log = logging.getLogger("kubetrain.informer")

Obj = dict[str, Any]
Key = tuple[str, str]
#: ``handler(event type, new or last object)``: called after the cache changed.
Handler = Callable[[str, Obj], None]
IndexFn = Callable[[Mapping[str, Any]], Hashable | None]


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _rv(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def _same_content(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two versions of an object differ only in their resourceVersion."""
    meta_a, meta_b = a.get("metadata") or {}, b.get("metadata") or {}
    return {**a, "metadata": {**meta_a, "resourceVersion": ""}} == {
        **b,
        "metadata": {**meta_b, "resourceVersion": ""},
    }


def is_older(candidate: str, current: str) -> bool:
    """Whether ``candidate`` predates ``current``. resourceVersions are opaque, but they
    are etcd revisions (integers) in practice; anything else is never called older."""
    if candidate.isdigit() and current.isdigit():
        return int(candidate) < int(current)
    return False


class ListWatch(Protocol):
    """The two calls an informer makes (``kube.KubeApi`` provides them)."""

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> tuple[list[dict[str, Any]], str]: ...

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        timeout_seconds: int = 300,
        on_open: Any = None,
    ) -> Iterator[WatchEvent]: ...


# -- the informer -------------------------------------------------------------------------


class Informer:
    """Caches ``resource`` (in one namespace, or all) and calls ``handler`` on changes."""

    def __init__(
        self,
        api: ListWatch,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        transform: Callable[[Mapping[str, Any]], Obj] = dict,
        handler: Handler | None = None,
        echo_handler: Handler | None = None,
        index: IndexFn | None = None,
        watch_timeout: int = 300,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        #: Called for the echo of our own write (a watch event whose resourceVersion the
        #: cache already holds), which ``handler`` does not see: a job waiting for that
        #: very object must still be woken (its reconcile may have run before the write
        #: reached the cache).
        self.echo_handler = echo_handler
        self.metadata_only = metadata_only
        self.transform = transform
        self.handler = handler
        self.index_fn = index
        self.watch_timeout = watch_timeout
        self.synced = threading.Event()
        self.relists = 0
        #: Watches re-opened after a failure, by reason (``expired``: relisted after a
        #: 410 Gone; ``error``: any other failure), for ``kubetrain_watch_restarts_total``.
        self.restarts: dict[str, int] = {"expired": 0, "error": 0}
        self._store: dict[Key, Obj] = {}
        self._index: dict[Hashable, set[Key]] = {}
        self._lock = threading.RLock()
        self._rv = ""
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None
        self.name = f"{resource.plural}@{namespace or '*'}"

    # -- reads -------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        """The cached object, or None."""
        with self._lock:
            return self._store.get((namespace, name))

    def items(self) -> list[Obj]:
        """Every cached object."""
        with self._lock:
            return list(self._store.values())

    def by_index(self, value: Hashable) -> list[Obj]:
        """Cached objects whose index value is ``value``."""
        with self._lock:
            return [self._store[k] for k in self._index.get(value, ()) if k in self._store]

    # -- write-through -----------------------------------------------------------------

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """Put what the API server returned for our write into the cache."""
        self._apply("MODIFIED", self.transform(obj), notify=False)

    def mark_deleted(self, namespace: str, name: str, uid: str = "") -> None:
        """Record our delete: the object is shown as being deleted until the watch says
        it is gone (so it is neither counted nor recreated meanwhile)."""
        with self._lock:
            current = self._store.get((namespace, name))
            if current is None or (uid and (current.get("metadata") or {}).get("uid") != uid):
                return
            meta = dict(current.get("metadata") or {})
            meta.setdefault("deletionTimestamp", "pending")
            updated = dict(current)
            updated["metadata"] = meta
            self._store[(namespace, name)] = updated

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """List and watch on a daemon thread."""
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the open watch is shut down at once)."""
        self._stop.set()
        response = self._response
        if response is not None:
            # Best effort: the watch thread ends either way once it sees the flag.
            with contextlib.suppress(Exception):
                response.shutdown()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the watch thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        """List, then watch until stopped; relist on 410 Gone; back off on errors."""
        backoff = 0.2
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                backoff = 0.2
            except ApiError as err:
                if self._stop.is_set():
                    break
                if err.status == 410:
                    self.restarts["expired"] += 1
                    need_list = True
                    continue
                self.restarts["error"] += 1
                log.warning(
                    "watch failed, retrying",
                    extra={"informer": self.name, "error": str(err), "retry_in": backoff},
                )
                self._stop.wait(backoff * (1 + random.random()))
                backoff = min(backoff * 2, 30.0)
                if err.status in (0, 500, 503, 504) and not self._rv:
                    need_list = True

    def _list(self) -> None:
        items, rv = self.api.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            metadata_only=self.metadata_only,
        )
        fresh = {}
        for item in items:
            obj = self.transform(item)
            fresh[_key(obj)] = obj
        with self._lock:
            gone = [k for k in self._store if k not in fresh]
        for key in gone:
            last = self.get(*key)
            if last is not None:
                self._apply("DELETED", last)
        for obj in fresh.values():
            self._apply("ADDED", obj)
        self._rv = rv
        self.relists += 1
        self.synced.set()

    def _watch(self) -> None:
        def opened(response: Any) -> None:
            self._response = response

        timeout = int(self.watch_timeout * (0.8 + 0.4 * random.random()))
        for event in self.api.watch(
            self.resource,
            self.namespace,
            resource_version=self._rv,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            metadata_only=self.metadata_only,
            timeout_seconds=timeout,
            on_open=opened,
        ):
            if self._stop.is_set():
                return
            if event.type == "ERROR":
                code = int(event.object.get("code") or 0)
                raise ApiError(
                    code,
                    str(event.object.get("reason") or ""),
                    str(event.object.get("message") or ""),
                    f"WATCH {self.name}",
                )
            rv = _rv(event.object)
            if event.type == "BOOKMARK":
                self._rv = rv or self._rv
                continue
            self._apply(event.type, self.transform(event.object))
            if rv:
                self._rv = rv
        self._response = None

    def _apply(self, kind: str, obj: Obj, *, notify: bool = True) -> None:
        key = _key(obj)
        echo = quiet = False
        with self._lock:
            current = self._store.get(key)
            if kind == "DELETED":
                if current is None:
                    return
                current_uid = (current.get("metadata") or {}).get("uid")
                if current_uid and current_uid != (obj.get("metadata") or {}).get("uid"):
                    return  # a newer object of the same name is already cached
                del self._store[key]
                self._unindex(key, current)
            else:
                same_uid = current is not None and (current.get("metadata") or {}).get("uid") == (
                    obj.get("metadata") or {}
                ).get("uid")
                if same_uid and current is not None:
                    if is_older(_rv(obj), _rv(current)):
                        return
                    if _rv(obj) == _rv(current) and notify:
                        echo = True  # our own write, already cached: no change to report
                    elif notify and _same_content(obj, current):
                        quiet = True  # e.g. timestamps the transform drops: nothing to report
                if not echo:
                    if current is not None:
                        self._unindex(key, current)
                    self._store[key] = obj
                    self._reindex(key, obj)
        if echo or quiet:
            if self.echo_handler is not None:
                self.echo_handler(kind, obj)
            return
        if notify and self.handler is not None:
            self.handler(kind, obj)

    def _reindex(self, key: Key, obj: Obj) -> None:
        if self.index_fn is None:
            return
        value = self.index_fn(obj)
        if value is not None:
            self._index.setdefault(value, set()).add(key)

    def _unindex(self, key: Key, obj: Obj) -> None:
        if self.index_fn is None:
            return
        value = self.index_fn(obj)
        if value is not None:
            keys = self._index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._index[value]


def scoped(
    informers: Mapping[tuple[str, str | None], Informer], kind: str, namespace: str | None
) -> Informer | None:
    """The informer of ``kind`` that covers ``namespace``: the namespace's own, else the
    cluster-wide one. (Informers had a length, so an empty one was falsy and an ``or``
    here skipped a namespace's informer until it held an object, losing every
    write-through into it: the first pods of a fresh namespace were created twice. They
    have no length now.)"""
    own = informers.get((kind, namespace))
    return own if own is not None else informers.get((kind, None))
