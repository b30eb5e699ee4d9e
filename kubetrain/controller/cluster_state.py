"""The operator's view of the cluster: informer caches for jobs and their children, and
the writes reconciles make, each put into the cache as soon as the API server answers.

This is the only place the reconciler's small interfaces (``JobCache``,
``ClusterWriter``) meet the Kubernetes adapter (``kube.KubeApi``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.kinds import TRAINJOB, by_operator_name, kind_info
from kubetrain.controller.decisions import NAMED_IN_STATUS, ChildRef, Event
from kubetrain.controller.errors import ApiError, ChildConflict, Deposed
from kubetrain.controller.events import EventRecorder
from kubetrain.controller.informer import Informer, scoped
from kubetrain.controller.kube import (
    CHILD_RESOURCES,
    JOB_RESOURCES,
    POD_GROUP_RESOURCES,
    KubeApi,
    Resource,
)
from kubetrain.controller.model import Observed
from kubetrain.controller.node_watch import NodeWatch
from kubetrain.controller.ownership import Holder, controller_of, holder
from kubetrain.controller.plugins import runtime_snapshot
from kubetrain.controller.plugins.trainjob_plugin import runtime_ref
from kubetrain.controller.runtimes import RuntimeCache, RuntimeKey, SnapshotData
from kubetrain.controller.trim import (
    trim_autoscaler,
    trim_batch_job,
    trim_metadata_only,
    trim_pod,
    trim_pod_group,
    trim_training_job,
)

log = logging.getLogger("kubetrain.operator")

JobKey = tuple[str, str, str]
_TRANSFORMS: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "Pod": trim_pod,
    "Service": trim_metadata_only,
    "ConfigMap": trim_metadata_only,
    "Job": trim_batch_job,
    "PodGroup": trim_pod_group,
    "HorizontalPodAutoscaler": trim_autoscaler,
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
    return str((controller_of(obj) or {}).get("uid") or "")


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
        event_qps: float = 50.0,
        pod_group_api_version: str | None = None,
    ) -> None:
        self.api = api
        #: Where each child kind lives; PodGroups in the gang scheduler's API group.
        self.child_resources: dict[str, Resource] = dict(CHILD_RESOURCES)
        if pod_group_api_version is not None:
            self.child_resources["PodGroup"] = POD_GROUP_RESOURCES[pod_group_api_version]
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
        self._snapshots = SnapshotData(api)
        scopes: tuple[str | None, ...] = namespaces or (None,)
        # Cluster-wide informers leave the excluded namespaces out on the server side.
        fields = namespace_field_selector(exclude_namespaces) if not namespaces else None
        self.job_informers: dict[tuple[str, str | None], Informer] = {}
        self.child_informers: dict[tuple[str, str | None], Informer] = {}
        watched = sorted({c for k in kinds for c in self.child_kinds[k]})
        selector = K.operator_name_selector(kinds)
        #: The runtimes TrainJobs reference (only when the operator serves TrainJobs).
        self.runtimes: RuntimeCache | None = None
        if TRAINJOB.kind in kinds:
            self.runtimes = RuntimeCache(
                api,
                scopes,
                users=self.runtime_users,
                on_change=self._on_runtime,
                field_selector=fields,
            )
        for scope in scopes:
            for kind in kinds:
                self.job_informers[(kind, scope)] = Informer(
                    api,
                    JOB_RESOURCES[kind],
                    namespace=scope,
                    field_selector=fields,
                    transform=trim_training_job,
                    handler=lambda _t, obj, k=kind: self._on_job(k, obj),  # type: ignore[misc]
                    index=runtime_ref if kind == TRAINJOB.kind else None,
                )
            for child in watched:
                self.child_informers[(child, scope)] = Informer(
                    api,
                    self.child_resources[child],
                    namespace=scope,
                    label_selector=selector,
                    field_selector=fields,
                    metadata_only=child in ("Service", "ConfigMap"),
                    transform=_TRANSFORMS[child],
                    handler=self._on_child,
                    echo_handler=self._on_child_echo,
                    index=child_index,
                )
        pods = [i for (kind, _), i in self.child_informers.items() if kind == "Pod"]
        self.nodes = NodeWatch(api, lambda: pods, enqueue, child_index)
        self.events = EventRecorder(api, identity, may_write, event_qps)

    # -- lifecycle -----------------------------------------------------------------------

    def _runtime_informers(self) -> list[Informer]:
        return list(self.runtimes.informers.values()) if self.runtimes is not None else []

    def informers(self) -> list[Informer]:
        """Every informer, jobs first."""
        return [
            *self.job_informers.values(),
            *self.child_informers.values(),
            *self._runtime_informers(),
            self.nodes.informer,
        ]

    def start(self) -> None:
        """Start the informers and the Event sender."""
        # Children and runtimes first, so a job's first reconcile sees what exists.
        for informer in [
            *self.child_informers.values(),
            *self._runtime_informers(),
            self.nodes.informer,
            *self.job_informers.values(),
        ]:
            informer.start()
        self.events.start()

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
        for informer in self.informers():
            informer.join(timeout=2)
        self.events.stop()

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
        if kind == TRAINJOB.kind:
            ref = runtime_ref(obj)
            if ref is not None:
                self._enqueue(ref)  # its runtime's in-use annotation follows its users

    def _on_runtime(self, key: RuntimeKey) -> None:
        self._enqueue(key)
        for raw in self.runtime_users(key):
            meta = raw.get("metadata") or {}
            self._enqueue((TRAINJOB.kind, str(meta.get("namespace")), str(meta.get("name"))))

    def runtime_users(self, key: RuntimeKey) -> list[Mapping[str, Any]]:
        """The cached TrainJobs that name runtime ``key`` (those being deleted aside)."""
        out: list[Mapping[str, Any]] = []
        for (kind, _scope), informer in self.job_informers.items():
            if kind != TRAINJOB.kind:
                continue
            out += [
                o
                for o in informer.by_index(key)
                if not (o.get("metadata") or {}).get("deletionTimestamp")
            ]
        return out

    def runtime(self, key: RuntimeKey) -> dict[str, Any] | None:
        """The cached runtime ``key``."""
        return self.runtimes.get(key) if self.runtimes is not None else None

    def set_runtime_in_use(self, key: RuntimeKey, runtime: Mapping[str, Any], in_use: bool) -> None:
        """Add or remove runtime ``key``'s in-use annotation."""
        self._fence()
        if self.runtimes is not None:
            self.runtimes.set_in_use(key, runtime, in_use)

    def _on_child(self, type_: str, obj: Mapping[str, Any]) -> None:
        if type_ == "DELETED" and obj.get("kind") == "ConfigMap":
            self._snapshots.forget(obj)
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
        return scoped(self.job_informers, kind, namespace)

    def _child_informer(self, child: str, namespace: str) -> Informer | None:
        return scoped(self.child_informers, child, namespace)

    def job(self, key: JobKey) -> dict[str, Any] | None:
        """The cached job, or None."""
        kind, namespace, name = key
        informer = self._job_informer(kind, namespace)
        return informer.get(namespace, name) if informer is not None else None

    def observed(self, key: JobKey, uid: str, now: datetime) -> Observed:
        """The job's children from the caches: those it controls (a same-named job's
        leftovers are not), and the pods of its launcher Job."""
        kind = key[0]
        found: dict[str, dict[str, Any]] = {}
        for child in self.child_kinds[kind]:
            informer = self._child_informer(child, key[1])
            objs = informer.by_index(key) if informer is not None else []
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
        raw = self.job(key) if kind == TRAINJOB.kind else None
        snapshot = found.get("ConfigMap", {}).get(runtime_snapshot.snapshot_name(key[2]))
        return Observed(
            pods=pods,
            services=found.get("Service", {}),
            config_maps=found.get("ConfigMap", {}),
            batch_jobs=found.get("Job", {}),
            pod_groups=found.get("PodGroup", {}),
            autoscalers=found.get("HorizontalPodAutoscaler", {}),
            now=now,
            runtime=self.runtimes.for_trainjob(raw) if raw and self.runtimes else None,
            runtime_snapshot=self._snapshots.data(snapshot) if raw and snapshot else None,
            nodes=self.nodes.of(pods.values()),
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

    def create(self, obj: dict[str, Any]) -> bool:
        """Create a child. A name already taken is this job's only if the existing object
        is controlled by this job (a stale cache); otherwise ``ChildConflict``, and the
        object is left untouched. True when this call created it."""
        self._fence()
        kind = str(obj["kind"])
        meta = obj["metadata"]
        try:
            result = self.api.create(obj)
        except ApiError as err:
            if err.status != 409:
                raise
            if kind in NAMED_IN_STATUS:
                # Not readable (Secrets): the name is the operator's own random choice,
                # recorded in the job's status before the create; taken, it was taken by
                # an earlier create of this operator whose answer was lost.
                return False
            existing = self.api.get(self.child_resources[kind], meta.get("namespace"), meta["name"])
            if existing is None:
                raise  # deleted in between: a retry creates it
            verdict = holder(existing, obj)
            if verdict.holder is Holder.THIS_JOB:
                self._write_through(kind, existing)
                return False
            raise ChildConflict(
                kind,
                str(meta.get("namespace")),
                str(meta["name"]),
                verdict.description,
                predecessor=verdict.holder is Holder.PREDECESSOR,
            ) from err
        self._write_through(kind, result)
        return True

    def _write_through(self, kind: str, result: Mapping[str, Any]) -> None:
        namespace = str((result.get("metadata") or {}).get("namespace") or "")
        if kind == "ConfigMap":
            self._snapshots.remember(result)
        informer = self._child_informer(kind, namespace)
        if informer is not None:
            informer.upsert(result)

    def delete(self, namespace: str, ref: ChildRef) -> None:
        """Delete a child with a uid precondition; the cache shows it as being deleted."""
        self._fence()
        resource = self.child_resources[ref.kind]
        self.api.delete(resource, namespace, ref.name, uid=ref.uid or None, grace=ref.delete_grace)
        informer = self._child_informer(ref.kind, namespace)
        if informer is not None:
            informer.mark_deleted(namespace, ref.name, ref.uid)

    def ungate(self, namespace: str, ref: ChildRef, gate: str) -> None:
        """Remove scheduling gate ``gate`` from pod ``ref`` (uid and gate position are
        preconditions: a pod that changed meanwhile is looked at again)."""
        self._fence()
        cached = self._child_informer("Pod", namespace)
        pod = cached.get(namespace, ref.name) if cached is not None else None
        gates = ((pod or {}).get("spec") or {}).get("schedulingGates") or []
        names = [g.get("name") for g in gates]
        if gate not in names:
            return
        index = names.index(gate)
        try:
            result = self.api.json_patch(
                CHILD_RESOURCES["Pod"],
                namespace,
                ref.name,
                [
                    {"op": "test", "path": "/metadata/uid", "value": ref.uid},
                    {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": gate},
                    {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
                ],
            )
        except ApiError as err:
            if err.status in (404, 409, 422):
                return  # gone, replaced or changed: its watch event brings the job back
            raise
        self._write_through("Pod", result)

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

    def patch_job(self, key: JobKey, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON patch of the job (a resourceVersion ``test`` makes it conditional)."""
        self._fence()
        kind, namespace, name = key
        result = self.api.json_patch(JOB_RESOURCES[kind], namespace, name, ops)
        informer = self._job_informer(kind, namespace)
        if informer is not None:
            informer.upsert(result)
        return result

    def delete_job(self, key: JobKey, uid: str) -> None:
        """Delete the job (uid precondition); its children go by garbage collection."""
        self._fence()
        kind, namespace, name = key
        self.api.delete(JOB_RESOURCES[kind], namespace, name, uid=uid)

    def emit_event(self, raw: Mapping[str, Any], event: Event) -> None:
        """Record an Event about ``raw`` (queued; see :class:`EventRecorder`)."""
        self.events.emit(raw, event)
