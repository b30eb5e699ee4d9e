"""Building blocks of the children every plugin creates: owner references, labels,
pods from replica templates, batch Jobs, headless Services, and the spec hash that lets
the reconciler skip children that have not changed.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.common import JobBase, ReplicaSpec, RestartPolicy
from kubetrain.api.kinds import kind_info
from kubetrain.frameworks import EnvVar


def namespace_of(job: JobBase) -> str:
    """The job's namespace (default when unset)."""
    return job.metadata.namespace or "default"


def uid_of(job: JobBase) -> str:
    """The job's uid (set by the API server)."""
    return str((job.metadata.model_extra or {}).get("uid", ""))


def owner_reference(job: JobBase) -> dict[str, Any]:
    """The controller owner reference every child carries (garbage collection)."""
    return {
        "apiVersion": kind_info(job.kind).api_version,
        "kind": job.kind,
        "name": job.name,
        "uid": uid_of(job),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_labels(job: JobBase) -> dict[str, str]:
    """``operator-name`` and ``job-name``: what every child carries."""
    return K.job_labels(job.kind, job.name)


def replica_labels(
    job: JobBase, replica_type: str, index: int, role: str | None = None
) -> dict[str, str]:
    """A replica's labels: the job's plus type, index and optional role."""
    out = job_labels(job)
    out[K.REPLICA_TYPE] = replica_type.lower()
    out[K.REPLICA_INDEX] = str(index)
    if role:
        out[K.JOB_ROLE] = role
    return out


def metadata(job: JobBase, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """Child metadata: name, namespace, labels and the owner reference."""
    return {
        "name": name,
        "namespace": namespace_of(job),
        "labels": dict(labels),
        "ownerReferences": [owner_reference(job)],
    }


def pod_restart_policy(policy: RestartPolicy) -> str:
    """The pod's restartPolicy for a replica policy: ExitCode pods never restart in
    place (the operator decides from the exit code)."""
    return "Never" if policy in (RestartPolicy.EXIT_CODE, RestartPolicy.NEVER) else policy.value


def inject_env(container: dict[str, Any], env: list[EnvVar]) -> None:
    """Add ``env`` to a container; a variable the container already sets keeps its value."""
    if not env:
        return
    current: list[dict[str, Any]] = container.setdefault("env", [])
    present = {e.get("name") for e in current}
    current.extend(dict(e) for e in env if e["name"] not in present)


def pod_template(
    spec: ReplicaSpec,
    *,
    labels: Mapping[str, str],
    restart_policy: str,
    env_for: Callable[[int, dict[str, Any]], list[EnvVar]],
) -> dict[str, Any]:
    """A pod template (metadata + spec) from a replica's template: our labels win, the
    Istio sidecar is off unless the template says otherwise, ``env_for(i, container)``
    gives each container's injected variables."""
    template = copy.deepcopy(spec.template)
    meta = template.get("metadata") or {}
    pod_labels = dict(meta.get("labels") or {})
    pod_labels.update(labels)
    annotations = dict(meta.get("annotations") or {})
    annotations.setdefault(K.ISTIO_INJECT_ANNOTATION, "false")
    pod_spec: dict[str, Any] = dict(template.get("spec") or {})
    pod_spec["restartPolicy"] = restart_policy
    containers = [copy.deepcopy(c) for c in pod_spec.get("containers") or []]
    for index, container in enumerate(containers):
        inject_env(container, env_for(index, container))
    pod_spec["containers"] = containers
    return {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": pod_spec}


def pod(
    job: JobBase,
    name: str,
    template: Mapping[str, Any],
) -> dict[str, Any]:
    """A Pod object from a built template."""
    meta = metadata(job, name, template["metadata"]["labels"])
    meta["annotations"] = dict(template["metadata"]["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


#: The least ``ttlSecondsAfterFinished`` a child Job carries. Kubernetes' TTL controller
#: must not remove a finished launcher before the operator has read its outcome: a
#: launcher gone while its MPIJob still runs is created again, and ``mpirun`` would run
#: twice (upstream's race with a TTL of 0 under load). The operator itself deletes the
#: launcher at the job's TTL, once the outcome is recorded.
MIN_JOB_TTL_SECONDS = 60


def batch_job(
    job: JobBase, name: str, labels: Mapping[str, str], template: Mapping[str, Any]
) -> dict[str, Any]:
    """A batch/v1 Job owned by ``job`` running ``template`` (an MPIJob's launcher), with
    the run policy's ``backoffLimit`` and ``ttlSecondsAfterFinished`` as mpi-operator
    v0.8.0 sets them, the TTL at least ``MIN_JOB_TTL_SECONDS``: the Job's own TTL
    controller then removes the finished Job even while the operator is down (the
    operator's TTL deletes it at the job's TTL; whichever comes second finds it gone)."""
    spec: dict[str, Any] = {"template": copy.deepcopy(dict(template))}
    policy = job.run_policy
    if policy is not None and policy.backoff_limit is not None:
        spec["backoffLimit"] = policy.backoff_limit
    if policy is not None and policy.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = max(
            policy.ttl_seconds_after_finished, MIN_JOB_TTL_SECONDS
        )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(job, name, labels),
        "spec": spec,
    }


def service_ports(pod_spec: Mapping[str, Any], container_name: str) -> list[dict[str, Any]]:
    """The named container's ports (else the first container's), as Service ports."""
    containers = pod_spec.get("containers") or []
    if not containers:
        return []
    main = next((c for c in containers if c.get("name") == container_name), containers[0])
    out = []
    for index, port in enumerate(main.get("ports") or []):
        number = port.get("containerPort")
        if not isinstance(number, int):
            continue
        out.append(
            {
                "name": port.get("name") or f"port-{index}",
                "port": number,
                "targetPort": number,
                "protocol": port.get("protocol", "TCP"),
            }
        )
    return out


def headless_service(
    job: JobBase,
    name: str,
    *,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    ports: list[dict[str, Any]],
    publish_not_ready: bool = False,
) -> dict[str, Any]:
    """A headless Service (``clusterIP: None``) owned by the job."""
    spec: dict[str, Any] = {"clusterIP": "None", "selector": dict(selector)}
    if ports:
        spec["ports"] = ports
    if publish_not_ready:
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(job, name, labels),
        "spec": spec,
    }


def spec_hash(obj: Mapping[str, Any]) -> str:
    """A short, stable hash of a desired child (its hash annotation excluded)."""
    # Copies only the two levels it changes: a deep copy of the child cost more than the
    # hashing itself, on every child of every reconcile.
    body = dict(obj)
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations")
    if annotations and K.SPEC_HASH_ANNOTATION in annotations:
        kept = {k: v for k, v in annotations.items() if k != K.SPEC_HASH_ANNOTATION}
        body["metadata"] = {**meta, "annotations": kept}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its spec-hash annotation set (in place; returned for convenience)."""
    digest = spec_hash(obj)
    obj["metadata"].setdefault("annotations", {})[K.SPEC_HASH_ANNOTATION] = digest
    return obj


def observed_hash(obj: Mapping[str, Any] | None) -> str | None:
    """The spec-hash annotation of an observed child, if any."""
    if obj is None:
        return None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(K.SPEC_HASH_ANNOTATION)
    return str(value) if value is not None else None
