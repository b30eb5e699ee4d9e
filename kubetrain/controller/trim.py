"""What the operator's caches keep of each object: children only the fields the
operator reads (no managedFields, no pod specs but their GPU requests and pool, no
Secret data, only the pod conditions the policies look at), jobs whole but for
managedFields and kubectl's last-applied copy.

A cache of 5,000 jobs holds about 19,000 pods and 15,000 other children, and the JSON
decoder makes a new string for every value: the namespace, each label, the owner's
apiVersion, kind, name and uid, "True", "Running". The children's repeated strings are
shared (``sys.intern``): about a third of a trimmed pod's memory.
"""

from __future__ import annotations

import sys
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


#: The pod conditions the policies read (``podstate``): Ready, why a pod is not scheduled,
#: and why it was disrupted.
POD_CONDITIONS = frozenset({"Ready", "PodScheduled", "DisruptionTarget"})


def _shared(value: Any) -> Any:
    """``value``, the one copy of it when it is a string (see the module docs)."""
    return sys.intern(value) if isinstance(value, str) else value


def _trim_meta(meta: Mapping[str, Any], annotations: Iterable[str] = ()) -> dict[str, Any]:
    out = {k: meta[k] for k in _META_KEEP if k in meta}
    if "namespace" in out:
        out["namespace"] = _shared(out["namespace"])
    if out.get("labels"):
        out["labels"] = {_shared(k): _shared(v) for k, v in out["labels"].items()}
    if out.get("ownerReferences"):
        out["ownerReferences"] = [
            {k: _shared(v) for k, v in ref.items()} for ref in out["ownerReferences"]
        ]
    wanted = {k: v for k, v in (meta.get("annotations") or {}).items() if k in set(annotations)}
    if wanted:
        out["annotations"] = wanted
    return out


KEPT_ANNOTATIONS = (K.SPEC_HASH_ANNOTATION, K.ADMITTED_NODES_ANNOTATION)


def trim_metadata_only(obj: Mapping[str, Any]) -> Obj:
    """Services, ConfigMaps, Secrets: metadata only (a Secret's keys never reach memory)."""
    return {
        "kind": _shared(obj.get("kind")),
        "metadata": _trim_meta(obj.get("metadata") or {}, KEPT_ANNOTATIONS),
    }


def _trim_container_status(cs: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("name", "restartCount", "ready", "state", "lastState")
    return {k: _shared(cs[k]) for k in keep if k in cs and cs[k] != {}}


def trim_pod(obj: Mapping[str, Any]) -> Obj:
    """Pods: identity, restartPolicy, scheduling gates, the status fields the policies
    read, and for the metrics the containers' GPU resources and the GPU pool selector."""
    status = obj.get("status") or {}
    trimmed_status: dict[str, Any] = {
        k: _shared(status[k]) for k in ("phase", "reason", "message", "startTime") if k in status
    }
    conditions = [
        {k: _shared(c[k]) for k in ("type", "status", "reason", "message") if k in c}
        for c in status.get("conditions") or []
        if c.get("type") in POD_CONDITIONS
    ]
    if conditions:
        trimmed_status["conditions"] = conditions
    for key in ("containerStatuses", "initContainerStatuses"):
        if status.get(key):
            trimmed_status[key] = [_trim_container_status(cs) for cs in status[key]]
    spec = obj.get("spec") or {}
    kept = ("restartPolicy", "nodeName", "schedulingGates")
    trimmed_spec = {k: _shared(spec[k]) for k in kept if k in spec}
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


def trim_autoscaler(obj: Mapping[str, Any]) -> Obj:
    """HorizontalPodAutoscalers: identity, the spec-hash annotation, the metrics they
    target and what they measured and decided (a scale Event quotes them)."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    keep = ("currentMetrics", "currentReplicas", "desiredReplicas", "lastScaleTime")
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": _trim_meta(obj.get("metadata") or {}, KEPT_ANNOTATIONS),
        "spec": {"metrics": spec["metrics"]} if spec.get("metrics") else {},
        "status": {k: status[k] for k in keep if k in status},
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


def trim_node(obj: Mapping[str, Any]) -> Obj:
    """Nodes: name, taints, allocatable GPUs and each condition's type, status, reason and
    transition time (``node_health`` reads them). Heartbeat times are dropped, so a node
    that only reports it is alive changes nothing in the cache and wakes no job."""
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    conditions = [
        {k: _shared(c[k]) for k in ("type", "status", "reason", "lastTransitionTime") if k in c}
        for c in status.get("conditions") or []
    ]
    taints = [
        {k: _shared(t[k]) for k in ("key", "value", "effect") if k in t}
        for t in (obj.get("spec") or {}).get("taints") or []
    ]
    gpus = (status.get("allocatable") or {}).get(K.GPU_RESOURCE)
    trimmed_status: dict[str, Any] = {"conditions": conditions}
    if gpus is not None:
        trimmed_status["allocatable"] = {K.GPU_RESOURCE: gpus}
    return {
        "kind": "Node",
        "metadata": {k: v for k, v in meta.items() if k in ("name", "uid", "resourceVersion")},
        "spec": {"taints": taints} if taints else {},
        "status": trimmed_status,
    }
