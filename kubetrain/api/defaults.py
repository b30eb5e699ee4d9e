"""The explicit defaulting step: upstream Kubeflow's defaults, applied to a copy.

Parsing never invents values; the operator (and anything else that needs a complete job)
calls :func:`apply_defaults`. Defaults, per kind ("stored": the CRD's schema has it too, so
the API server writes it into the stored object; both come from the models'
``StoredDefault`` markers, ``kubetrain.api.stored_defaults``):

- every kind: ``runPolicy.cleanPodPolicy: None`` (not stored: the operator's cleanup tells
  an unset policy from ``None``, ``kubetrain.controller.policies.cleanup``) and
  ``runPolicy.suspend: false`` (stored when the job has a ``runPolicy``; the step adds
  one), each replica spec's ``replicas: 1`` (stored), ``protocol: TCP`` on every declared
  container port (stored: the schema's default for that list-map key);
- PyTorchJob: ``restartPolicy: OnFailure`` (stored); ``nprocPerNode: auto`` (unless the
  deprecated ``elasticPolicy.nProcPerNode`` is set); ``elasticPolicy`` min/max mirror each
  other, or both take the Worker replica count, and ``rdzvBackend: c10d`` (stored); the
  ``pytorchjob-port`` (23456) container port on the ``pytorch`` container (else the first
  one);
- TFJob: ``restartPolicy: Never`` (stored); the ``tfjob-port`` (2222) container port on the
  ``tensorflow`` container (else the first one);
- XGBoostJob: ``restartPolicy: Never`` (stored); the ``xgboostjob-port`` (9999) container
  port on the ``xgboost`` container (else the first one);
- MPIJob: Launcher ``restartPolicy: OnFailure``, Worker ``Never``; ``slotsPerWorker: 1``,
  ``runLauncherAsWorker: false``, ``sshAuthMountPath: /root/.ssh``,
  ``launcherCreationPolicy: AtStartup``, ``mpiImplementation: OpenMPI`` (all five stored).

Only this step, not the schema, can give what depends on other fields or on the replica
type: a restart policy that differs between an MPIJob's Launcher and Worker (one schema
holds every replica type), ``nprocPerNode`` (not with the deprecated field), elastic
bounds taken from each other or the Worker count, the main container's port (a list
item), and a ``runPolicy`` object where the job has none (the server creates no object to
hold a default).

Upstream defaults an MPIJob Worker's replicas to 0, which its own validation then rejects;
kubetrain defaults it to 1 like every other replica type.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from kubetrain.api.common import JobBase
from kubetrain.api.kinds import KINDS, MPI, PYTORCH, TENSORFLOW, XGBOOST, KindInfo
from kubetrain.api.mpi import MPIJob
from kubetrain.api.pytorch import PyTorchJob
from kubetrain.api.stored_defaults import fill_stored_defaults
from kubetrain.api.tensorflow import TFJob
from kubetrain.api.xgboost import XGBoostJob

J = TypeVar("J", bound=JobBase)


def _ensure_port(template: dict[str, Any], container_name: str, port_name: str, port: int) -> None:
    containers = template.get("spec", {}).get("containers") or []
    if not containers:
        return
    target = next((c for c in containers if c.get("name") == container_name), containers[0])
    ports = target.setdefault("ports", [])
    if not any(p.get("name") == port_name for p in ports):
        ports.append({"name": port_name, "containerPort": port, "protocol": "TCP"})


def _default_port_protocols(template: dict[str, Any]) -> None:
    # The API server stores protocol TCP on every declared port (a list-map key, defaulted
    # by the schema); the operator's copy says the same (upstream's XGBoost examples
    # declare xgboostjob-port without one).
    pod = template.get("spec") or {}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in pod.get(key) or []:
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")


def _default_restart_policies(specs: dict[str, Any], kind: KindInfo) -> None:
    for rtype, rspec in specs.items():
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


_MODELS: dict[str, type[JobBase]] = {
    PYTORCH.kind: PyTorchJob,
    TENSORFLOW.kind: TFJob,
    MPI.kind: MPIJob,
    XGBOOST.kind: XGBoostJob,
}


def default_wire(obj: dict[str, Any]) -> dict[str, Any]:
    """Defaults applied to a wire-form job (a deep copy is returned)."""
    out = copy.deepcopy(obj)
    kind = out["kind"]
    model = _MODELS.get(kind)
    if model is None:
        raise ValueError(f"kind {kind!r} has no defaults: expected one of {', '.join(_MODELS)}")
    spec = out["spec"]
    # cleanPodPolicy is not a stored default: the cleanup reads whether the job set it.
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
    fill_stored_defaults(model, out)
    info = KINDS[kind]
    specs = spec[info.replica_specs_field]
    _default_restart_policies(specs, info)
    for rspec in specs.values():
        _default_port_protocols(rspec["template"])
    if kind == PYTORCH.kind:
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
    if info.main_container is not None:
        _ensure_main_port(specs, info)
    return out


def apply_defaults(job: J) -> J:
    """A copy of ``job`` with every upstream default filled in (see the module docs)."""
    return type(job).model_validate(default_wire(job.to_wire()))
