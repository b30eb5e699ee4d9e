"""Job manifests of the v1 kinds (wire form, camelCase), loaded jobs, and the environment
they are given. One builder per kind; a tier's presets (observed jobs for the operator's
unit tests, GPU pods for the control plane) pass their keywords to it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from cluster.topology import GPU_RESOURCE
from kubetrain.api import load_job
from kubetrain.api.common import JobBase
from kubetrain.api.kinds import KINDS
from kubetrain.frameworks import EnvVar
from kubetrain.manifest import parse_yaml
from tests.conftest import EXAMPLES

J = TypeVar("J", bound=JobBase)

#: The image of every container the builders write.
IMAGE = "example/trainer:1"
#: What a pod needs to land on a tainted GPU node.
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}

#: ``pods(replica type, container)``: the pod template of a replica type's pods.
Pods = Callable[[str, str], dict[str, Any]]


def example(name: str) -> dict[str, Any]:
    """One of kubetrain's examples (examples/<name>), as a dict."""
    data: dict[str, Any] = parse_yaml((EXAMPLES / name).read_text())
    return data


def template(
    container: str = "pytorch",
    *,
    image: str = IMAGE,
    port: dict[str, Any] | None = None,
    cpu: str | None = None,
    gpus: int = 0,
    tolerate: bool = True,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod template with one container (and ``port``, if given). ``cpu`` requests that
    much; ``gpus`` asks for GPUs and tolerates the GPU taint unless ``tolerate`` is False
    (under Kueue, the ResourceFlavor brings the toleration)."""
    main: dict[str, Any] = {"name": container, "image": image}
    if port is not None:
        main["ports"] = [port]
    resources: dict[str, Any] = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    if gpus:
        resources["limits"] = {GPU_RESOURCE: str(gpus)}
    if resources:
        main["resources"] = resources
    if env:
        main["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec: dict[str, Any] = {}
    if gpus and tolerate:
        spec["tolerations"] = [GPU_TOLERATION]
    spec["containers"] = [main]
    return {"spec": spec}


def plain_pods(replica_type: str, container: str) -> dict[str, Any]:
    """The default :data:`Pods`: one container, nothing requested."""
    return template(container)


def replica(count: int, pod: dict[str, Any], restart_policy: str | None = None) -> dict[str, Any]:
    """A replica spec of ``count`` pods of template ``pod``."""
    spec: dict[str, Any] = {"replicas": count}
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    spec["template"] = copy.deepcopy(pod)
    return spec


def job(
    kind: str,
    replicas: dict[str, dict[str, Any]],
    *,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A ``kind`` job of replica specs ``replicas``; ``spec`` adds (or replaces) fields."""
    info = KINDS[kind]
    out: dict[str, Any] = {
        "apiVersion": info.api_version,
        "kind": kind,
        "metadata": {"name": name, **(metadata or {})},
        "spec": {info.replica_specs_field: replicas},
    }
    out["spec"].update(copy.deepcopy(spec))
    return out


def _replicas(
    counts: dict[str, tuple[int, str]], pods: Pods, restart_policy: str | None
) -> dict[str, dict[str, Any]]:
    """Replica specs from ``{type: (count, container)}``; a count of 0 leaves it out."""
    return {
        rtype: replica(count, pods(rtype, container), restart_policy)
        for rtype, (count, container) in counts.items()
        if count
    }


def pytorch_job(
    *,
    master: bool = True,
    workers: int = 2,
    restart_policy: str | None = None,
    pods: Pods = plain_pods,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A PyTorchJob: a Master (unless ``master`` is False) and ``workers`` Workers."""
    counts = {"Master": (1 if master else 0, "pytorch"), "Worker": (workers, "pytorch")}
    replicas = _replicas(counts, pods, restart_policy)
    return job("PyTorchJob", replicas, name=name, metadata=metadata, **spec)


def tf_job(
    *,
    chief: bool = False,
    ps: int = 0,
    workers: int = 2,
    restart_policy: str | None = None,
    pods: Pods = plain_pods,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A TFJob: a Chief if ``chief``, ``ps`` PS and ``workers`` Workers."""
    counts = {
        "Chief": (1 if chief else 0, "tensorflow"),
        "PS": (ps, "tensorflow"),
        "Worker": (workers, "tensorflow"),
    }
    replicas = _replicas(counts, pods, restart_policy)
    return job("TFJob", replicas, name=name, metadata=metadata, **spec)


def mpi_job(
    *,
    workers: int = 2,
    restart_policy: str | None = None,
    pods: Pods = plain_pods,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An MPIJob: a Launcher and ``workers`` Workers."""
    counts = {"Launcher": (1, "launcher"), "Worker": (workers, "worker")}
    replicas = _replicas(counts, pods, restart_policy)
    return job("MPIJob", replicas, name=name, metadata=metadata, **spec)


def paddle_job(
    *,
    master: bool = False,
    workers: int = 2,
    restart_policy: str | None = None,
    pods: Pods = plain_pods,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A PaddleJob: a Master if ``master`` (parameter-server mode) and ``workers`` Workers."""
    counts = {"Master": (1 if master else 0, "paddle"), "Worker": (workers, "paddle")}
    replicas = _replicas(counts, pods, restart_policy)
    return job("PaddleJob", replicas, name=name, metadata=metadata, **spec)


def jax_job(
    *,
    workers: int = 2,
    restart_policy: str | None = None,
    pods: Pods = plain_pods,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A JAXJob of ``workers`` Workers (Worker 0 coordinates)."""
    replicas = _replicas({"Worker": (workers, "jax")}, pods, restart_policy)
    return job("JAXJob", replicas, name=name, metadata=metadata, **spec)


def xgboost_job(
    *,
    workers: int = 2,
    restart_policy: str | None = None,
    pods: Pods = plain_pods,
    name: str = "job",
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An XGBoostJob: a Master (the tracker) and ``workers`` Workers."""
    counts = {"Master": (1, "xgboost"), "Worker": (workers, "xgboost")}
    replicas = _replicas(counts, pods, restart_policy)
    return job("XGBoostJob", replicas, name=name, metadata=metadata, **spec)


def set_path(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set a dotted path (``spec.x.y``; list indexes as ``[0]``) in a copy of ``obj``."""
    out = copy.deepcopy(obj)
    node: Any = out
    parts = path.replace("[", ".[").split(".")
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value
    return out


def loaded(
    model: type[J], spec: dict[str, Any], name: str, namespace: str = "ml", uid: str | None = None
) -> J:
    """A job of ``model``'s kind with ``spec``, through :func:`load_job` (as a user's)."""
    kind = str(model.model_fields["kind"].default)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid is not None:
        metadata["uid"] = uid
    out = load_job(
        {"apiVersion": KINDS[kind].api_version, "kind": kind, "metadata": metadata, "spec": spec}
    )
    assert isinstance(out, model)
    return out


def as_dict(env: list[EnvVar]) -> dict[str, str]:
    """The variables by name (no name twice)."""
    names = [var["name"] for var in env]
    assert len(names) == len(set(names)), f"duplicate variables in {names}"
    return {var["name"]: var["value"] for var in env}
