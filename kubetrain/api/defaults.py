"""The explicit defaulting step: upstream Kubeflow's defaults, applied to a copy.

Parsing never invents values; the operator (and anything else that needs a complete job)
calls :func:`apply_defaults`. Defaults, per kind ("stored": the CRD's schema has it too, so
the API server writes it into the stored object; both come from the models'
``StoredDefault`` markers, ``kubetrain.api.stored_defaults``):

- every kind: ``runPolicy.cleanPodPolicy: None`` (not stored: the operator's cleanup tells
  an unset policy from ``None``, ``kubetrain.controller.policies.cleanup``) and
  ``runPolicy.suspend: false`` (stored when the job has a ``runPolicy``; the step adds
  one), each replica spec's ``replicas: 1`` (stored), and the pod template's list-map key
  defaults (stored by the embedded schema): a container port's ``protocol: TCP``, an image
  pull secret's ``name: ""``;
- PyTorchJob: ``restartPolicy: OnFailure`` (stored); ``nprocPerNode: auto`` (unless the
  deprecated ``elasticPolicy.nProcPerNode`` is set); ``elasticPolicy`` min/max mirror each
  other, or both take the Worker replica count, and ``rdzvBackend: c10d`` (stored); the
  ``pytorchjob-port`` (23456) container port on the ``pytorch`` container (else the first
  one);
- TFJob: ``restartPolicy: Never`` (stored); the ``tfjob-port`` (2222) container port on the
  ``tensorflow`` container (else the first one);
- MPIJob: Launcher ``restartPolicy: OnFailure``, Worker ``Never``; ``slotsPerWorker: 1``,
  ``runLauncherAsWorker: false``, ``sshAuthMountPath: /root/.ssh``,
  ``launcherCreationPolicy: AtStartup``, ``mpiImplementation: OpenMPI`` (all five stored);
- PaddleJob: ``restartPolicy: OnFailure`` (stored); ``elasticPolicy`` min/max as a
  PyTorchJob's; the ``master`` (36543) container port on the ``paddle`` container (else the
  first one).

A kind's own defaults are its module's (``kubetrain/api/<kind>.py``, the ``defaults`` of its
:class:`~kubetrain.api.job_kind.JobKind`); this step applies every kind's and then those.

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
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import JOB_KIND_APIS, KINDS
from kubetrain.api.stored_defaults import fill_stored_defaults

J = TypeVar("J", bound=JobBase)


def _ensure_port(template: dict[str, Any], container_name: str, port_name: str, port: int) -> None:
    containers = template.get("spec", {}).get("containers") or []
    if not containers:
        return
    target = next((c for c in containers if c.get("name") == container_name), containers[0])
    ports = target.setdefault("ports", [])
    if not any(p.get("name") == port_name for p in ports):
        ports.append({"name": port_name, "containerPort": port, "protocol": "TCP"})


def _default_template_keys(template: dict[str, Any]) -> None:
    """The defaults the CRD's embedded pod template declares for list-map keys, which the
    server stores: a port's ``protocol`` (TCP) and an image pull secret's ``name`` ("")."""
    pod = template.get("spec") or {}
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in pod.get(field) or []:
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")
    for secret in pod.get("imagePullSecrets") or []:
        secret.setdefault("name", "")


def _default_restart_policies(specs: dict[str, Any], kind: KindInfo) -> None:
    for rtype, rspec in specs.items():
        rspec.setdefault("restartPolicy", kind.default_restart_policy(rtype))


def _ensure_main_port(specs: dict[str, Any], kind: KindInfo) -> None:
    assert kind.main_container and kind.port_name and kind.default_port
    for rspec in specs.values():
        _ensure_port(rspec["template"], kind.main_container, kind.port_name, kind.default_port)


def default_wire(obj: dict[str, Any]) -> dict[str, Any]:
    """Defaults applied to a wire-form job (a deep copy is returned)."""
    out = copy.deepcopy(obj)
    kind = out["kind"]
    api = JOB_KIND_APIS.get(kind)
    if api is None:
        raise ValueError(f"kind {kind!r} has no defaults: expected one of {', '.join(KINDS)}")
    spec = out["spec"]
    # cleanPodPolicy is not a stored default: the cleanup reads whether the job set it.
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
    fill_stored_defaults(api.model, out)
    info = api.info
    specs = spec[info.replica_specs_field]
    _default_restart_policies(specs, info)
    api.defaults(spec)
    if info.main_container is not None:
        _ensure_main_port(specs, info)
    for rspec in specs.values():
        _default_template_keys(rspec["template"])
    return out


def apply_defaults(job: J) -> J:
    """A copy of ``job`` with every upstream default filled in (see the module docs)."""
    return type(job).model_validate(default_wire(job.to_wire()))
