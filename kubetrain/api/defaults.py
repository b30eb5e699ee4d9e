"""The explicit defaulting step: upstream Kubeflow's defaults, applied to a copy.

Parsing never invents values; the operator (and anything else that needs a complete job)
calls :func:`apply_defaults`. Defaults, per kind:

- every kind: ``runPolicy.cleanPodPolicy: None``, ``runPolicy.suspend: false``, each
  replica spec's ``replicas: 1``;
- PyTorchJob: ``restartPolicy: OnFailure``; ``nprocPerNode: auto`` (unless the deprecated
  ``elasticPolicy.nProcPerNode`` is set); ``elasticPolicy`` min/max mirror each other, or
  both take the Worker replica count, and ``rdzvBackend: c10d``; the ``pytorchjob-port``
  (23456) container port on the ``pytorch`` container (else the first one);
- TFJob: ``restartPolicy: Never``; the ``tfjob-port`` (2222) container port on the
  ``tensorflow`` container (else the first one);
- MPIJob: Launcher ``restartPolicy: OnFailure``, Worker ``Never``; ``slotsPerWorker: 1``,
  ``runLauncherAsWorker: false``, ``sshAuthMountPath: /root/.ssh``,
  ``launcherCreationPolicy: AtStartup``, ``mpiImplementation: OpenMPI``.

Upstream defaults an MPIJob Worker's replicas to 0, which its own validation then rejects;
kubetrain defaults it to 1 like every other replica type.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from kubetrain.api import mpi
from kubetrain.api.common import JobBase
from kubetrain.api.kinds import MPI, PYTORCH, TENSORFLOW, KindInfo

J = TypeVar("J", bound=JobBase)


def _ensure_port(template: dict[str, Any], container_name: str, port_name: str, port: int) -> None:
    containers = template.get("spec", {}).get("containers") or []
    if not containers:
        return
    target = next((c for c in containers if c.get("name") == container_name), containers[0])
    ports = target.setdefault("ports", [])
    if not any(p.get("name") == port_name for p in ports):
        ports.append({"name": port_name, "containerPort": port, "protocol": "TCP"})


def _default_replicas(specs: dict[str, Any], kind: KindInfo) -> None:
    for rtype, rspec in specs.items():
        rspec.setdefault("replicas", 1)
        rspec.setdefault("restartPolicy", kind.default_restart_policy(rtype))


def _ensure_main_port(specs: dict[str, Any], kind: KindInfo) -> None:
    assert kind.main_container and kind.port_name and kind.default_port
    for rspec in specs.values():
        _ensure_port(rspec["template"], kind.main_container, kind.port_name, kind.default_port)


def default_nproc_per_node(spec: dict[str, Any]) -> str | None:
    """A PyTorchJob's ``nprocPerNode`` default (wire form): ``auto``, unless the deprecated
    ``elasticPolicy.nProcPerNode`` says it (then none is set). The one place it is decided."""
    elastic = spec.get("elasticPolicy")
    if elastic is not None and elastic.get("nProcPerNode") is not None:
        return None
    return "auto"


def _default_run_policy(spec: dict[str, Any]) -> None:
    policy = spec.setdefault("runPolicy", {})
    policy.setdefault("cleanPodPolicy", "None")
    policy.setdefault("suspend", False)


def default_wire(obj: dict[str, Any]) -> dict[str, Any]:
    """Defaults applied to a wire-form job (a deep copy is returned)."""
    out = copy.deepcopy(obj)
    spec = out["spec"]
    kind = out["kind"]
    _default_run_policy(spec)
    if kind == PYTORCH.kind:
        specs = spec[PYTORCH.replica_specs_field]
        _default_replicas(specs, PYTORCH)
        nproc = default_nproc_per_node(spec)
        if nproc is not None:
            spec.setdefault("nprocPerNode", nproc)
        elastic = spec.get("elasticPolicy")
        if elastic is not None:
            workers = specs.get("Worker", {}).get("replicas", 1)
            low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
            elastic["minReplicas"] = (
                low if low is not None else (high if high is not None else workers)
            )
            elastic["maxReplicas"] = high if high is not None else elastic["minReplicas"]
            elastic.setdefault("rdzvBackend", "c10d")
        _ensure_main_port(specs, PYTORCH)
    elif kind == TENSORFLOW.kind:
        specs = spec[TENSORFLOW.replica_specs_field]
        _default_replicas(specs, TENSORFLOW)
        _ensure_main_port(specs, TENSORFLOW)
    elif kind == MPI.kind:
        _default_replicas(spec[MPI.replica_specs_field], MPI)
        spec.setdefault("slotsPerWorker", 1)
        spec.setdefault("runLauncherAsWorker", False)
        spec.setdefault("sshAuthMountPath", mpi.DEFAULT_SSH_AUTH_MOUNT_PATH)
        spec.setdefault("launcherCreationPolicy", "AtStartup")
        spec.setdefault("mpiImplementation", "OpenMPI")
    else:
        raise ValueError(f"kind {kind!r} has no defaults: expected PyTorchJob, TFJob or MPIJob")
    return out


def apply_defaults(job: J) -> J:
    """A copy of ``job`` with every upstream default filled in (see the module docs)."""
    return type(job).model_validate(default_wire(job.to_wire()))
