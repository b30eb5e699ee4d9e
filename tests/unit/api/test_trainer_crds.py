"""The generated Trainer v2 CRDs: names and scopes as upstream's, structural, compact,
GitOps-clean, with the pinned pod template, printer columns and the status subresource."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft7Validator

from kubetrain.api.crd_generator import node_at as _node
from kubetrain.api.crds import MAX_CRD_BYTES, crd_for, crd_schema, serialized_size
from kubetrain.api.k8s_openapi import embedded_schema
from kubetrain.api.kinds import TRAINER_KINDS
from kubetrain.manifest import dump
from tests.builders.trainer import sdk_bodies, trainer_examples, upstream_documents

CRDS = {kind: crd_for(kind) for kind in TRAINER_KINDS}


def _version(kind: str) -> dict[str, Any]:
    (version,) = CRDS[kind]["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def _root(kind: str) -> dict[str, Any]:
    root: dict[str, Any] = _version(kind)["schema"]["openAPIV3Schema"]
    return root


def _nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _nodes(schema[key], f"{path}[{key}]")


def test_names_scopes_and_versions_are_upstreams() -> None:
    assert {k: (c["metadata"]["name"], c["spec"]["scope"]) for k, c in CRDS.items()} == {
        "TrainJob": ("trainjobs.trainer.kubeflow.org", "Namespaced"),
        "TrainingRuntime": ("trainingruntimes.trainer.kubeflow.org", "Namespaced"),
        "ClusterTrainingRuntime": ("clustertrainingruntimes.trainer.kubeflow.org", "Cluster"),
    }
    for kind, crd in CRDS.items():
        assert crd["spec"]["group"] == "trainer.kubeflow.org"
        assert crd["spec"]["names"]["listKind"] == f"{kind}List"
        assert crd["spec"]["names"]["plural"] == kind.lower() + "s"
        version = _version(kind)
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)


@pytest.mark.parametrize("kind", CRDS)
def test_crd_is_smaller_than_the_annotation_limit(kind: str) -> None:
    # The last-applied annotation (kubectl, Argo CD client-side apply) holds compact JSON.
    assert serialized_size(CRDS[kind]) < MAX_CRD_BYTES // 3


def test_sizes_as_documented() -> None:
    sizes = {kind: serialized_size(crd) for kind, crd in CRDS.items()}
    # The runtimes embed the JobTemplateSpec (and its pod template) and a claim template.
    assert 60_000 < sizes["TrainingRuntime"] < 90_000
    # The TrainJob embeds the pod fields of runtimePatches and of podTemplateOverrides.
    assert 60_000 < sizes["TrainJob"] < 90_000
    # As YAML, the deeply nested pod template is indented far more than in the v1 CRDs.
    assert len(dump(CRDS["TrainingRuntime"]).encode()) > MAX_CRD_BYTES


# A JobSet enum ('' for OpenMPI) and the default the API server requires for a list-map key
# that is not required (imagePullSecrets[].name) are values, not empty fields.
ALLOWED_EMPTY_STRINGS = (".enum[1]", ".imagePullSecrets.items.properties.name.default")


@pytest.mark.parametrize("kind", CRDS)
def test_crd_has_no_status_and_no_empty_fields(kind: str) -> None:
    crd = CRDS[kind]
    assert "status" not in crd

    def walk(value: Any, path: str) -> Iterator[str]:
        if isinstance(value, dict):
            if not value and path != ".spec.versions[0].subresources.status":
                yield path
            for k, v in value.items():
                yield from walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            if not value:
                yield path
            for i, v in enumerate(value):
                yield from walk(v, f"{path}[{i}]")
        elif value is None or (value == "" and not path.endswith(ALLOWED_EMPTY_STRINGS)):
            yield path

    assert list(walk(crd, "")) == []


_RUNTIME_DEFAULTS: dict[str, object] = {
    ".spec.mlPolicy.flux.numProcPerNode": 1,
    ".spec.mlPolicy.mpi.mpiImplementation": "OpenMPI",
    ".spec.mlPolicy.mpi.numProcPerNode": 1,
    ".spec.mlPolicy.mpi.runLauncherAsNode": False,
    ".spec.mlPolicy.mpi.sshAuthMountPath": "/root/.ssh",
    ".spec.podGroupPolicy.coscheduling.scheduleTimeoutSeconds": 60,
    ".spec.podGroupPolicy.volcano.networkTopology.highestTierAllowed": 1,
    ".spec.podGroupPolicy.volcano.networkTopology.mode": "hard",
    ".spec.template.spec.failurePolicy.restartStrategy": "Recreate",
    ".spec.template.spec.replicatedJobs[items].groupName": "default",
    ".spec.template.spec.replicatedJobs[items].replicas": 1,
    ".spec.template.spec.volumeClaimPolicies[items].retentionPolicy.whenDeleted": "Delete",
}
#: Every ``default`` of upstream Trainer v2.3.0's CRDs (manifests/base/crds) outside the
#: embedded Kubernetes types: what its API server stores into objects that leave them out.
UPSTREAM_DEFAULTS: dict[str, dict[str, object]] = {
    "TrainJob": {
        ".spec.managedBy": "trainer.kubeflow.org/trainjob-controller",
        ".spec.runtimeRef.apiGroup": "trainer.kubeflow.org",
        ".spec.runtimeRef.kind": "ClusterTrainingRuntime",
        ".spec.suspend": False,
    },
    "TrainingRuntime": _RUNTIME_DEFAULTS,
    "ClusterTrainingRuntime": _RUNTIME_DEFAULTS,
}


@pytest.mark.parametrize("kind", CRDS)
def test_crd_schema_is_structural_and_stores_upstreams_defaults(kind: str) -> None:
    for path, node in _nodes(_root(kind)):
        if node.get("x-kubernetes-int-or-string"):
            assert node.get("anyOf") == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "type" in node, f"{path} has no type"
        if "properties" in node or "additionalProperties" in node:
            assert node["type"] == "object", path
        if "items" in node:
            assert node["type"] == "array", path
        assert not {"anyOf", "oneOf", "allOf"} & set(node), path
    defaults = {p: n["default"] for p, n in _nodes(_root(kind)) if "default" in n}
    # List-map keys the API server requires a default for, and upstream's defaults.
    keys = [p for p in defaults if p.endswith((".protocol", "imagePullSecrets[items].name"))]
    others = {p: v for p, v in defaults.items() if p not in keys}
    assert others == UPSTREAM_DEFAULTS[kind]


def test_runtime_template_is_the_pinned_job_template() -> None:
    rjobs = _node(_root("TrainingRuntime"), ("spec", "template", "spec", "replicatedJobs"))
    assert rjobs["x-kubernetes-list-type"] == "map"
    assert rjobs["x-kubernetes-list-map-keys"] == ["name"]
    assert rjobs["maxItems"] == 5
    template = dict(rjobs["items"]["properties"]["template"])
    description = template.pop("description")
    assert "batch Job template" in description
    assert template == embedded_schema("io.k8s.api.batch.v1.JobTemplateSpec")
    pod = template["properties"]["spec"]["properties"]["template"]
    assert pod == embedded_schema("io.k8s.api.core.v1.PodTemplateSpec")
    assert rjobs["items"]["required"] == ["name", "template"]


def test_trainjob_embeds_core_types() -> None:
    trainer = _node(_root("TrainJob"), ("spec", "trainer"))["properties"]
    assert trainer["resourcesPerNode"]["properties"]["limits"]["additionalProperties"][
        "x-kubernetes-int-or-string"
    ]
    env = trainer["env"]
    assert (env["x-kubernetes-list-type"], env["x-kubernetes-list-map-keys"], env["maxItems"]) == (
        "map",
        ["name"],
        128,
    )
    assert env["items"] == embedded_schema("io.k8s.api.core.v1.EnvVar")
    assert trainer["command"]["items"]["maxLength"] == 1048576
    assert trainer["numNodes"]["minimum"] == 1


def test_status_subresource_and_printer_columns() -> None:
    # The scale subresource (elastic TrainJobs): kubectl scale and an HPA set numNodes.
    assert _version("TrainJob")["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.trainer.numNodes",
            "statusReplicasPath": ".status.nodes",
            "labelSelectorPath": ".status.selector",
        },
    }
    columns = {c["name"]: c["jsonPath"] for c in _version("TrainJob")["additionalPrinterColumns"]}
    assert columns == {
        "Runtime": ".spec.runtimeRef.name",
        "State": ".status.state",
        # What the training process reports (the SDK's update_trainjob_status).
        "Progress": ".status.trainerStatus.progressPercentage",
        "ETA": ".status.trainerStatus.estimatedRemainingSeconds",
        "Ready": ".status.readyNodes",
        "Nodes": ".status.nodes",
        "Restarts": ".status.restarts",
        # kubetrain's progress and goodput, with -o wide.
        "Step": ".status.kubetrain.progress.step",
        "Goodput": ".status.kubetrain.goodput.ratio",
        "Age": ".metadata.creationTimestamp",
    }
    status = _root("TrainJob")["properties"]["status"]["properties"]
    for field in ("readyNodes", "nodes", "restarts"):
        assert status[field]["type"] == "integer" and "kubetrain" in status[field]["description"]
    assert status["jobsStatus"]["items"]["required"] == [
        "active",
        "failed",
        "name",
        "ready",
        "succeeded",
        "suspended",
    ]
    for kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
        assert "subresources" not in _version(kind)
        assert "status" not in _root(kind)["properties"]
        columns = {c["name"]: c["jsonPath"] for c in _version(kind)["additionalPrinterColumns"]}
        assert columns["Framework"] == ".metadata.labels.trainer\\.kubeflow\\.org/framework"


def test_objects_validate_against_their_crd_schema() -> None:
    objects = [doc for _, doc in upstream_documents()] + list(sdk_bodies().values())
    objects += [doc for _, doc in trainer_examples()]
    for obj in objects:
        errors = list(Draft7Validator(crd_schema(obj["kind"])).iter_errors(obj))
        assert errors == [], obj["metadata"]


def test_rejects_unknown_kind_for_schema() -> None:
    with pytest.raises(KeyError, match="JobSet"):
        crd_schema("JobSet")
