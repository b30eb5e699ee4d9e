"""The runtimes TrainJobs reference, cached, and marked while they are referenced.

TrainingRuntimes (in the watched namespaces) and ClusterTrainingRuntimes (cluster-wide)
are watched; a change to one wakes the TrainJobs that name it. A TrainJob is built from
its runtime snapshot (``plugins/runtime_snapshot``), so it never needs the runtime again;
the Kubeflow SDK does (its ``list_jobs`` / ``get_job`` read the runtime of every job,
kubeflow/sdk#797). So a runtime TrainJobs name carries the annotation
``kubetrain.dev/runtime-in-use``, removed once none does, and the operator's
runtime-protection ValidatingAdmissionPolicy (``constructs/runtime_protection``) refuses
to delete a runtime that carries it while the operator's Deployment runs. Nothing waits
on the annotation: with the operator uninstalled or scaled to zero the policy lets every
deletion through, where the finalizer kubetrain 0.1 used left the runtime Terminating for
good (the operator removes that finalizer wherever it finds it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kubetrain.api import keys as K
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME
from kubetrain.controller.errors import ApiError
from kubetrain.controller.informer import Informer, scoped
from kubetrain.controller.kube import CONFIG_MAPS, RUNTIME_RESOURCES, KubeApi
from kubetrain.controller.plugins import runtime_snapshot
from kubetrain.controller.plugins.trainjob_plugin import runtime_ref

log = logging.getLogger("kubetrain.operator")

RuntimeKey = tuple[str, str, str]
#: The kinds whose objects the runtime guard reconciles (work-queue keys of these kinds).
RUNTIME_KINDS = (TRAINING_RUNTIME.kind, CLUSTER_TRAINING_RUNTIME.kind)


def trim_runtime(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A runtime without its managedFields (the spec builds the TrainJob's pods)."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


def key_of(obj: Mapping[str, Any]) -> RuntimeKey:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


class RuntimeCache:
    """Runtime informers, the TrainJobs that use each runtime, and the finalizer writes."""

    def __init__(
        self,
        api: KubeApi,
        scopes: tuple[str | None, ...],
        *,
        users: Callable[[RuntimeKey], list[Mapping[str, Any]]],
        on_change: Callable[[RuntimeKey], None],
        field_selector: str | None = None,
    ) -> None:
        self.api = api
        #: The TrainJobs (raw, cached) that name a runtime.
        self.users = users
        self.informers: dict[tuple[str, str | None], Informer] = {}
        for scope in scopes:
            self.informers[(TRAINING_RUNTIME.kind, scope)] = Informer(
                api,
                RUNTIME_RESOURCES[TRAINING_RUNTIME.kind],
                namespace=scope,
                field_selector=field_selector,
                transform=trim_runtime,
                handler=lambda _t, obj: on_change(key_of(obj)),
            )
        self.informers[(CLUSTER_TRAINING_RUNTIME.kind, None)] = Informer(
            api,
            RUNTIME_RESOURCES[CLUSTER_TRAINING_RUNTIME.kind],
            transform=trim_runtime,
            handler=lambda _t, obj: on_change(key_of(obj)),
        )

    def get(self, key: RuntimeKey) -> dict[str, Any] | None:
        """The cached runtime, or None."""
        kind, namespace, name = key
        informer = scoped(self.informers, kind, namespace or None)
        found = informer.get(namespace, name) if informer is not None else None
        return dict(found) if found is not None else None

    def for_trainjob(self, raw: Mapping[str, Any]) -> dict[str, Any] | None:
        """The runtime a (raw) TrainJob names, if it exists."""
        ref = runtime_ref(raw)
        return self.get(ref) if ref is not None else None

    def set_in_use(self, key: RuntimeKey, runtime: Mapping[str, Any], in_use: bool) -> None:
        """Add or remove the in-use annotation, and drop kubetrain 0.1's in-use
        finalizer (the resourceVersion is a precondition: a runtime that changed
        meanwhile is looked at again when its event arrives)."""
        ops = in_use_patch(runtime, in_use)
        if not ops:
            return
        kind, namespace, name = key
        try:
            self.api.json_patch(RUNTIME_RESOURCES[kind], namespace or None, name, ops)
        except ApiError as err:
            if err.status == 422:
                # The resourceVersion test failed (its watch event brings it back), or an
                # admission policy refused the write: never silently.
                log.warning("runtime not marked", extra={"runtime": name, "error": str(err)})
                return
            if err.status in (404, 409):
                return  # gone or changed: its watch event brings it back
            raise
        log.info(
            "runtime marked " + ("in use" if in_use else "unused"),
            extra={"runtime": f"{kind}/{namespace + '/' if namespace else ''}{name}"},
        )


def in_use_patch(runtime: Mapping[str, Any], in_use: bool) -> list[dict[str, Any]]:
    """The JSON patch that marks ``runtime`` in use (or not) and drops the legacy
    finalizer; empty when there is nothing to change."""
    meta = runtime.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    ops: list[dict[str, Any]] = []
    if in_use and K.RUNTIME_IN_USE_ANNOTATION not in annotations:
        value = {**annotations, K.RUNTIME_IN_USE_ANNOTATION: "true"}
        ops.append({"op": "add", "path": "/metadata/annotations", "value": value})
    elif not in_use and K.RUNTIME_IN_USE_ANNOTATION in annotations:
        path = "/metadata/annotations/" + K.RUNTIME_IN_USE_ANNOTATION.replace("/", "~1")
        ops.append({"op": "remove", "path": path})
    finalizers = list(meta.get("finalizers") or [])
    if K.RUNTIME_IN_USE_FINALIZER in finalizers:
        kept = [f for f in finalizers if f != K.RUNTIME_IN_USE_FINALIZER]
        ops.append({"op": "replace", "path": "/metadata/finalizers", "value": kept})
    if not ops:
        return []
    version = {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": meta.get("resourceVersion"),
    }
    return [version, *ops]


class SnapshotData:
    """The data of TrainJobs' runtime snapshot ConfigMaps, by uid. The ConfigMap informer
    keeps metadata only; a snapshot never changes, so each is read once (or not at all:
    the one this replica created is remembered from the API server's answer)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._by_uid: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def data(self, config_map: Mapping[str, Any]) -> dict[str, Any] | None:
        """The data of this (cached, metadata-only) snapshot; None once it is gone."""
        meta = config_map.get("metadata") or {}
        uid = str(meta.get("uid"))
        with self._lock:
            data = self._by_uid.get(uid)
        if data is not None:
            return data
        got = self.api.get(CONFIG_MAPS, str(meta.get("namespace")), str(meta.get("name")))
        if got is None or str((got.get("metadata") or {}).get("uid")) != uid:
            return None
        self.remember(got)
        return dict(got.get("data") or {})

    def remember(self, config_map: Mapping[str, Any]) -> None:
        """Keep the data of a snapshot ConfigMap as the API server returned it."""
        meta = config_map.get("metadata") or {}
        if str(meta.get("name")).endswith(runtime_snapshot.SUFFIX):
            with self._lock:
                self._by_uid[str(meta.get("uid"))] = dict(config_map.get("data") or {})

    def forget(self, config_map: Mapping[str, Any]) -> None:
        with self._lock:
            self._by_uid.pop(str((config_map.get("metadata") or {}).get("uid")), None)


class RuntimeWriter(Protocol):
    def set_runtime_in_use(
        self, key: RuntimeKey, runtime: Mapping[str, Any], in_use: bool
    ) -> None: ...


def guard_runtime(
    key: RuntimeKey,
    runtime: Mapping[str, Any],
    users: Sequence[Mapping[str, Any]],
    writer: RuntimeWriter,
) -> None:
    """Mark ``runtime`` in use while TrainJobs (``users``) name it and it is not being
    deleted, unmark it once none does, and drop the legacy finalizer."""
    meta = runtime.get("metadata") or {}
    in_use = bool(users) and not meta.get("deletionTimestamp")
    if in_use_patch(runtime, in_use):
        writer.set_runtime_in_use(key, runtime, in_use)
