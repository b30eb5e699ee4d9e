"""The defaults the CRDs make the API server store: upstream's, and the same as the
operator's defaulting step.

Upstream's CRDs (mpi-operator v0.8.0, training-operator v1.9.0, Trainer v2.3.0) store the
defaults listed here; kubetrain's store those and the others a schema can state. Every
seed job (kubetrain's examples, sample jobs and upstream's examples) is defaulted the way
the API server does it, by a structural-defaulting walk of the generated schema written
here, and must then (a) hold only values the operator's own defaulting gives and (b)
default in code to exactly what the original does.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.api import crd_schema
from kubetrain.api.defaults import default_wire
from kubetrain.api.jax import JAXJob
from kubetrain.api.mpi import MPIJob
from kubetrain.api.pytorch import PyTorchJob
from kubetrain.api.stored_defaults import stored_defaults
from kubetrain.api.tensorflow import TFJob
from kubetrain.api.trainer import apply_trainer_defaults, load_trainer_object
from tests.builders.trainer import upstream_documents
from tests.k8s_schema import server_defaulted
from tests.unit.api.mutations import SEEDS

#: What upstream's own CRDs store (manifests/base/crds of training-operator v1.9.0 and
#: mpi-operator v0.8.0), outside the embedded pod templates.
UPSTREAM_STORED: dict[str, dict[str, Any]] = {
    "PyTorchJob": {".spec.runPolicy.suspend": False},
    "TFJob": {".spec.runPolicy.suspend": False},
    "JAXJob": {".spec.runPolicy.suspend": False},
    "MPIJob": {
        ".spec.launcherCreationPolicy": "AtStartup",
        ".spec.mpiImplementation": "OpenMPI",
        ".spec.runLauncherAsWorker": False,
        ".spec.runPolicy.suspend": False,
        ".spec.slotsPerWorker": 1,
        ".spec.sshAuthMountPath": "/root/.ssh",
    },
}
#: What kubetrain's CRDs store besides: upstream's defaults that its controllers apply in
#: code, where one schema value can say them.
KUBETRAIN_ALSO_STORES: dict[str, dict[str, Any]] = {
    "PyTorchJob": {
        ".spec.elasticPolicy.rdzvBackend": "c10d",
        ".spec.pytorchReplicaSpecs{}.replicas": 1,
        ".spec.pytorchReplicaSpecs{}.restartPolicy": "OnFailure",
    },
    "TFJob": {
        ".spec.tfReplicaSpecs{}.replicas": 1,
        ".spec.tfReplicaSpecs{}.restartPolicy": "Never",
    },
    "JAXJob": {
        ".spec.jaxReplicaSpecs{}.replicas": 1,
        ".spec.jaxReplicaSpecs{}.restartPolicy": "Never",
    },
    "MPIJob": {".spec.mpiReplicaSpecs{}.replicas": 1},
}
MODELS = {"PyTorchJob": PyTorchJob, "TFJob": TFJob, "MPIJob": MPIJob, "JAXJob": JAXJob}


def schema_defaults(schema: dict[str, Any], path: str = "") -> dict[str, Any]:
    """Every ``default`` of a schema by path, outside embedded pod templates."""
    out: dict[str, Any] = {}
    if "default" in schema:
        out[path] = schema["default"]
    for key, child in (schema.get("properties") or {}).items():
        if key != "template" or "ReplicaSpecs" not in path:
            out.update(schema_defaults(child, f"{path}.{key}"))
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            out.update(schema_defaults(schema[key], f"{path}{mark}"))
    return out


def contained(part: Any, whole: Any) -> bool:
    """Whether every value of ``part`` is in ``whole`` at the same place."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            k in whole and contained(v, whole[k]) for k, v in part.items()
        )
    if isinstance(part, list):
        return (
            isinstance(whole, list)
            and len(part) == len(whole)
            and all(contained(a, b) for a, b in zip(part, whole, strict=True))
        )
    return bool(part == whole)


@pytest.mark.parametrize("kind", sorted(UPSTREAM_STORED))
def test_the_crd_stores_upstreams_defaults_and_the_ones_upstream_applies_in_code(
    kind: str,
) -> None:
    stored = schema_defaults(crd_schema(kind))
    expected = {**UPSTREAM_STORED[kind], **KUBETRAIN_ALSO_STORES[kind]}
    assert {p: v for p, v in stored.items() if not p.endswith(".protocol")} == expected


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_the_models_markers_are_what_the_crd_stores(kind: str) -> None:
    marked = {f".{path}": value for path, value in stored_defaults(MODELS[kind]).items()}
    stored = schema_defaults(crd_schema(kind))
    # The per-kind restart policy is the one stored default that is not a model marker.
    assert {p: v for p, v in stored.items() if not p.endswith((".protocol", "restartPolicy"))} == (
        marked
    )


@pytest.mark.parametrize(("seed", "job"), SEEDS, ids=[seed for seed, _ in SEEDS])
def test_stored_defaults_agree_with_the_operators_defaulting(
    seed: str, job: dict[str, Any]
) -> None:
    stored = server_defaulted(job, crd_schema(job["kind"]))
    operator = default_wire(job)
    assert contained(stored, operator), f"{seed}: the server stores what the operator does not"
    assert default_wire(stored) == operator


def test_an_mpijob_that_states_nothing_is_stored_with_upstreams_defaults() -> None:
    [job] = [j for s, j in SEEDS if s.endswith("pi/pi.yaml#0")]
    job = copy.deepcopy(job)
    for key in ("slotsPerWorker", "runLauncherAsWorker", "sshAuthMountPath"):
        job["spec"].pop(key, None)
    job["spec"]["runPolicy"] = {}
    stored = server_defaulted(job, crd_schema("MPIJob"))["spec"]
    assert stored["launcherCreationPolicy"] == "AtStartup"
    assert stored["mpiImplementation"] == "OpenMPI"
    assert stored["runLauncherAsWorker"] is False
    assert stored["sshAuthMountPath"] == "/root/.ssh"
    assert stored["slotsPerWorker"] == 1
    # cleanPodPolicy is not stored: unset, the operator's cleanup applies (docs/operator.md).
    assert stored["runPolicy"] == {"suspend": False}


@pytest.mark.parametrize(
    ("name", "obj"), upstream_documents(), ids=[name for name, _ in upstream_documents()]
)
def test_trainer_stored_defaults_agree_with_the_operators_defaulting(
    name: str, obj: dict[str, Any]
) -> None:
    stored = server_defaulted(obj, crd_schema(obj["kind"]))
    operator = apply_trainer_defaults(load_trainer_object(obj)).to_wire()
    assert contained(stored, operator), f"{name}: the server stores what the operator does not"
    assert apply_trainer_defaults(load_trainer_object(stored)).to_wire() == operator
