"""What the operator's caches keep of each object: children only the fields the
operator reads (no managedFields, no pod specs but their GPU requests and pool, no
Secret data), jobs whole but for managedFields and kubectl's last-applied copy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubetrain.api import keys as K

Obj = dict[str, Any]

_META_KEEP = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
)


def _trim_meta(meta: Mapping[str, Any], annotations: Iterable[str] = ()) -> dict[str, Any]:
    out = {k: meta[k] for k in _META_KEEP if k in meta}
    wanted = {k: v for k, v in (meta.get("annotations") or {}).items() if k in set(annotations)}
    if wanted:
        out["annotations"] = wanted
    return out


KEPT_ANNOTATIONS = (K.SPEC_HASH_ANNOTATION,)


def trim_metadata_only(obj: Mapping[str, Any]) -> Obj:
    """Services, ConfigMaps, Secrets: metadata only (a Secret's keys never reach memory)."""
    return {
        "kind": obj.get("kind"),
        "metadata": _trim_meta(obj.get("metadata") or {}, KEPT_ANNOTATIONS),
    }


def _trim_container_status(cs: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("name", "restartCount", "ready", "state", "lastState")
    return {k: cs[k] for k in keep if k in cs}


def trim_pod(obj: Mapping[str, Any]) -> Obj:
    """Pods: identity, restartPolicy, scheduling gates, the status fields the policies
    read, and for the metrics the containers' GPU resources and the GPU pool selector."""
    status = obj.get("status") or {}
    trimmed_status: dict[str, Any] = {
        k: status[k] for k in ("phase", "reason", "message", "startTime") if k in status
    }
    if status.get("conditions"):
        trimmed_status["conditions"] = [
            {k: c[k] for k in ("type", "status", "reason", "message") if k in c}
            for c in status["conditions"]
        ]
    for key in ("containerStatuses", "initContainerStatuses"):
        if status.get(key):
            trimmed_status[key] = [_trim_container_status(cs) for cs in status[key]]
    spec = obj.get("spec") or {}
    kept = ("restartPolicy", "nodeName", "schedulingGates")
    trimmed_spec = {k: spec[k] for k in kept if k in spec}
    # For the GPU metrics: the GPU resources of each container and the pool selector.
    gpu_containers = [
        {"resources": gpu} for c in spec.get("containers") or [] if (gpu := _gpu_resources(c))
    ]
    if gpu_containers:
        trimmed_spec["containers"] = gpu_containers
    pool = (spec.get("nodeSelector") or {}).get(K.GPU_POOL_LABEL)
    if pool:
        trimmed_spec["nodeSelector"] = {K.GPU_POOL_LABEL: pool}
    return {
        "kind": "Pod",
        "metadata": _trim_meta(obj.get("metadata") or {}, KEPT_ANNOTATIONS),
        "spec": trimmed_spec,
        "status": trimmed_status,
    }


def _gpu_resources(container: Mapping[str, Any]) -> dict[str, Any]:
    resources = container.get("resources") or {}
    out = {}
    for field in ("limits", "requests"):
        value = (resources.get(field) or {}).get(K.GPU_RESOURCE)
        if value is not None:
            out[field] = {K.GPU_RESOURCE: value}
    return out


def trim_batch_job(obj: Mapping[str, Any]) -> Obj:
    """batch Jobs: identity, suspend and the status the MPI rules read."""
    status = obj.get("status") or {}
    keep = ("conditions", "active", "succeeded", "failed", "ready", "startTime", "completionTime")
    return {
        "kind": "Job",
        "metadata": _trim_meta(obj.get("metadata") or {}, KEPT_ANNOTATIONS),
        "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k == "suspend"},
        "status": {k: status[k] for k in keep if k in status},
    }


def trim_pod_group(obj: Mapping[str, Any]) -> Obj:
    """PodGroups: identity, the spec-hash annotation and the scheduler's phase."""
    phase = (obj.get("status") or {}).get("phase")
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": "PodGroup",
        "metadata": _trim_meta(obj.get("metadata") or {}, KEPT_ANNOTATIONS),
        "status": {"phase": phase} if phase else {},
    }


def trim_training_job(obj: Mapping[str, Any]) -> Obj:
    """Jobs are kept whole (their spec builds the children) but for managedFields."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = meta.get("annotations") or {}
    if "kubectl.kubernetes.io/last-applied-configuration" in annotations:
        meta["annotations"] = {
            k: v
            for k, v in annotations.items()
            if k != "kubectl.kubernetes.io/last-applied-configuration"
        }
    out["metadata"] = meta
    return out
