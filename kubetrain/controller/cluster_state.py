"""The operator's view of the cluster: informer caches for jobs and their children, and
the writes reconciles make, each put into the cache as soon as the API server answers.

This is the only place the reconciler's small interfaces (``JobCache``,
``ClusterWriter``) meet the Kubernetes adapter (``kube.KubeApi``).
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
from kubetrain.api.kinds import by_operator_name, kind_info
from kubetrain.controller import reasons as R
from kubetrain.controller.conditions import format_time
from kubetrain.controller.decisions import ChildRef, Event
from kubetrain.controller.errors import ApiError, ChildConflict, Deposed
from kubetrain.controller.informer import (
    Informer,
    trim_batch_job,
    trim_metadata_only,
    trim_pod,
    trim_training_job,
)
from kubetrain.controller.kube import (
    CHILD_RESOURCES,
    JOB_RESOURCES,
    KubeApi,
)
from kubetrain.controller.ownership import Holder, holder
from kubetrain.controller.plugins.base import Observed

log = logging.getLogger("kubetrain.operator")

JobKey = tuple[str, str, str]
_TRANSFORMS: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "Pod": trim_pod,
    "Service": trim_metadata_only,
    "ConfigMap": trim_metadata_only,
    "Job": trim_batch_job,
}


def namespace_field_selector(excluded: tuple[str, ...]) -> str | None:
    """``metadata.namespace!=a,metadata.namespace!=b``: what the informers leave out."""
    return ",".join(f"metadata.namespace!={n}" for n in excluded) or None


def child_index(obj: Mapping[str, Any]) -> JobKey | None:
    """(kind of the owning job, namespace, job name) from a child's labels."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    info = by_operator_name(str(labels.get(K.OPERATOR_NAME, "")))
    job = labels.get(K.JOB_NAME)
    if info is None or not job:
        return None
    return (info.kind, str(meta.get("namespace") or ""), str(job))


def _controller_uid(obj: Mapping[str, Any]) -> str:
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            return str(owner.get("uid") or "")
    return ""


class KubeCluster:
    """Informers over the watched namespaces plus the write path."""

    def __init__(
        self,
        api: KubeApi,
        child_kinds: Mapping[str, tuple[str, ...]],
        namespaces: tuple[str, ...],
        enqueue: Callable[[JobKey], None],
        *,
        identity: str = "kubetrain",
        exclude_namespaces: tuple[str, ...] = (),
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.api = api
        #: Job kind -> the child kinds the operator watches for it (its plugin's).
        self.child_kinds = dict(child_kinds)
        kinds = tuple(child_kinds)
        self.kinds = kinds
        self.identity = identity
        self._enqueue = enqueue
        #: False while this replica cannot prove it still leads: every write refuses.
        self._may_write = may_write
        #: (kind, namespace, name) of children a job's startup gate waits for -> the job.
        self._awaited: dict[tuple[str, str, str], JobKey] = {}
        self._awaited_by: dict[JobKey, set[tuple[str, str, str]]] = {}
        self._awaited_lock = threading.Lock()
        scopes: tuple[str | None, ...] = namespaces or (None,)
        # Cluster-wide informers leave the excluded namespaces out on the server side.
        fields = namespace_field_selector(exclude_namespaces) if not namespaces else None
        self.job_informers: dict[tuple[str, str | None], Informer] = {}
        self.child_informers: dict[tuple[str, str | None], Informer] = {}
        watched = sorted({c for k in kinds for c in self.child_kinds[k]})
        selector = K.operator_name_selector(kinds)
        for scope in scopes:
            for kind in kinds:
                self.job_informers[(kind, scope)] = Informer(
                    api,
                    JOB_RESOURCES[kind],
                    namespace=scope,
                    field_selector=fields,
                    transform=trim_training_job,
                    handler=lambda _t, obj, k=kind: self._on_job(k, obj),  # type: ignore[misc]
                )
            for child in watched:
                self.child_informers[(child, scope)] = Informer(
                    api,
                    CHILD_RESOURCES[child],
                    namespace=scope,
                    label_selector=selector,
                    field_selector=fields,
                    metadata_only=child in ("Service", "ConfigMap"),
                    transform=_TRANSFORMS[child],
                    handler=self._on_child,
                    echo_handler=self._on_child_echo,
                    index=child_index,
                )
        self._events: queue.Queue[tuple[dict[str, Any], Event] | None] = queue.Queue(maxsize=10000)
        self._event_thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def informers(self) -> list[Informer]:
        """Every informer, jobs first."""
        return [*self.job_informers.values(), *self.child_informers.values()]

    def start(self) -> None:
        """Start the informers and the Event sender."""
        # Children first, so a job's first reconcile sees the children that exist.
        for informer in [*self.child_informers.values(), *self.job_informers.values()]:
            informer.start()
        self._event_thread = threading.Thread(
            target=self._send_events, name="event-recorder", daemon=True
        )
        self._event_thread.start()

    def wait_synced(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every informer's first list."""
        return all(i.synced.wait(timeout) for i in self.informers())

    def synced(self) -> bool:
        """Whether every informer has listed once."""
        return all(i.synced.is_set() for i in self.informers())

    def stop(self) -> None:
        """Stop the informers and flush the queued Events."""
        for informer in self.informers():
            informer.stop()
        self._events.put(None)
        for informer in self.informers():
            informer.join(timeout=2)
        if self._event_thread is not None:
            self._event_thread.join(timeout=5)

    def job_keys(self) -> list[JobKey]:
        """The keys of every cached job."""
        keys = []
        for (kind, _scope), informer in self.job_informers.items():
            for obj in informer.items():
                meta = obj.get("metadata") or {}
                keys.append((kind, str(meta.get("namespace")), str(meta.get("name"))))
        return keys

    # -- handlers ------------------------------------------------------------------------

    def _on_job(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self._enqueue((kind, str(meta.get("namespace")), str(meta.get("name"))))

    def _on_child(self, _type: str, obj: Mapping[str, Any]) -> None:
        key = child_index(obj)
        if key is not None:
            self._enqueue(key)

    def _on_child_echo(self, _type: str, obj: Mapping[str, Any]) -> None:
        """The echo of our own write wakes a job only if its startup gate waits for it."""
        meta = obj.get("metadata") or {}
        ref = (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        with self._awaited_lock:
            job = self._awaited.get(ref)
        if job is not None:
            self._enqueue(job)

    def set_awaited(self, key: JobKey, refs: frozenset[tuple[str, str]]) -> None:
        """Record the children (kind, name) job ``key``'s startup gate waits for."""
        wanted = {(kind, key[1], name) for kind, name in refs}
        with self._awaited_lock:
            for ref in self._awaited_by.pop(key, set()) - wanted:
                self._awaited.pop(ref, None)
            for ref in wanted:
                self._awaited[ref] = key
            if wanted:
                self._awaited_by[key] = wanted

    # -- JobCache ------------------------------------------------------------------------

    def _job_informer(self, kind: str, namespace: str) -> Informer | None:
        return self.job_informers.get((kind, namespace)) or self.job_informers.get((kind, None))

    def _child_informer(self, child: str, namespace: str) -> Informer | None:
        return self.child_informers.get((child, namespace)) or self.child_informers.get(
            (child, None)
        )

    def job(self, key: JobKey) -> dict[str, Any] | None:
        """The cached job, or None."""
        kind, namespace, name = key
        informer = self._job_informer(kind, namespace)
        return informer.get(namespace, name) if informer else None

    def observed(self, key: JobKey, uid: str, now: datetime) -> Observed:
        """The job's children from the caches: those it controls (a same-named job's
        leftovers are not), and the pods of its launcher Job."""
        kind = key[0]
        found: dict[str, dict[str, Any]] = {}
        for child in self.child_kinds[kind]:
            informer = self._child_informer(child, key[1])
            objs = informer.by_index(key) if informer else []
            found[child] = {
                str(o["metadata"]["name"]): o
                for o in objs
                if child == "Pod" or _controller_uid(o) == uid
            }
        job_uids = {str(o["metadata"].get("uid")) for o in found.get("Job", {}).values()}
        pods = {
            name: pod
            for name, pod in found["Pod"].items()
            if _controller_uid(pod) == uid or _controller_uid(pod) in job_uids
        }
        return Observed(
            pods=pods,
            services=found.get("Service", {}),
            config_maps=found.get("ConfigMap", {}),
            batch_jobs=found.get("Job", {}),
            now=now,
        )

    # -- ClusterWriter -------------------------------------------------------------------

    def _fence(self) -> None:
        if not self._may_write():
            raise Deposed("this replica cannot prove it still holds the leader lease")

    def apply(self, obj: dict[str, Any]) -> None:
        """Server-side apply a child this job already controls and cache the answer."""
        self._fence()
        result = self.api.apply(obj)
        self._write_through(obj["kind"], result)

    def create(self, obj: dict[str, Any]) -> None:
        """Create a child. A name already taken is this job's only if the existing object
        is controlled by this job (a stale cache); otherwise ``ChildConflict``, and the
        object is left untouched."""
        self._fence()
        kind = str(obj["kind"])
        meta = obj["metadata"]
        try:
            result = self.api.create(obj)
        except ApiError as err:
            if err.status != 409:
                raise
            existing = self.api.get(CHILD_RESOURCES[kind], meta.get("namespace"), meta["name"])
            if existing is None:
                raise  # deleted in between: a retry creates it
            verdict = holder(existing, obj)
            if verdict.holder is Holder.THIS_JOB:
                self._write_through(kind, existing)
                return
            raise ChildConflict(
                kind,
                str(meta.get("namespace")),
                str(meta["name"]),
                verdict.description,
                predecessor=verdict.holder is Holder.PREDECESSOR,
            ) from err
        self._write_through(kind, result)

    def create_generated(self, obj: dict[str, Any]) -> str:
        """Create a child under a generated name (``metadata.generateName``); its name."""
        self._fence()
        result = self.api.create(obj)
        return str((result.get("metadata") or {}).get("name"))

    def _write_through(self, kind: str, result: Mapping[str, Any]) -> None:
        namespace = str((result.get("metadata") or {}).get("namespace") or "")
        informer = self._child_informer(kind, namespace)
        if informer is not None:
            informer.upsert(result)

    def delete(self, namespace: str, ref: ChildRef) -> None:
        """Delete a child with a uid precondition; the cache shows it as being deleted."""
        self._fence()
        resource = CHILD_RESOURCES[ref.kind]
        self.api.delete(resource, namespace, ref.name, uid=ref.uid or None)
        informer = self._child_informer(ref.kind, namespace)
        if informer is not None:
            informer.mark_deleted(namespace, ref.name, ref.uid)

    def write_status(self, key: JobKey, raw: Mapping[str, Any], status: dict[str, Any]) -> None:
        """Server-side apply the status with a resourceVersion precondition."""
        self._fence()
        kind, namespace, name = key
        meta = raw.get("metadata") or {}
        body = {
            "apiVersion": raw.get("apiVersion", kind_info(kind).api_version),
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "status": status,
        }
        result = self.api.apply(body, subresource="status")
        informer = self._job_informer(kind, namespace)
        if informer is not None:
            informer.upsert(result)

    def delete_job(self, key: JobKey, uid: str) -> None:
        """Delete the job (uid precondition); its children go by garbage collection."""
        self._fence()
        kind, namespace, name = key
        self.api.delete(JOB_RESOURCES[kind], namespace, name, uid=uid)

    def emit_event(self, raw: Mapping[str, Any], event: Event) -> None:
        """Queue an Event (sent by a background thread; dropped when the queue is full)."""
        try:
            self._events.put_nowait((dict(raw), event))
        except queue.Full:
            log.warning("event queue full, dropping event", extra={"reason": event.reason})

    def _send_events(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            raw, event = item
            if not self._may_write():
                continue  # a deposed leader records nothing
            try:
                self.api.create(self._event_object(raw, event))
            except ApiError as err:
                log.warning("could not record event", extra={"error": str(err)})

    def _event_object(self, raw: Mapping[str, Any], event: Event) -> dict[str, Any]:
        meta = raw.get("metadata") or {}
        now = format_time(datetime.now().astimezone())
        namespace = str(meta.get("namespace") or "default")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": raw.get("apiVersion"),
                "kind": raw.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
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
