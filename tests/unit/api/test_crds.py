"""The generated CRDs: structural, compact, GitOps-clean, and accepting the examples."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft7Validator

from kubetrain.api import crd_for, crd_schema
from kubetrain.api.crds import MAX_CRD_BYTES, serialized_size
from kubetrain.api.kinds import JOB_KINDS
from kubetrain.manifest import dump
from tests.builders.jobs import example, pytorch_job, set_path

CRDS = {kind: crd_for(kind) for kind in JOB_KINDS}


def _version(kind: str) -> dict[str, Any]:
    (version,) = CRDS[kind]["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def _nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _nodes(schema[key], f"{path}[{key}]")


def test_crd_names_and_versions() -> None:
    assert {k: (c["metadata"]["name"], _version(k)["name"]) for k, c in CRDS.items()} == {
        "PyTorchJob": ("pytorchjobs.kubeflow.org", "v1"),
        "TFJob": ("tfjobs.kubeflow.org", "v1"),
        "MPIJob": ("mpijobs.kubeflow.org", "v2beta1"),
        "PaddleJob": ("paddlejobs.kubeflow.org", "v1"),
        "JAXJob": ("jaxjobs.kubeflow.org", "v1"),
        "XGBoostJob": ("xgboostjobs.kubeflow.org", "v1"),
    }
    for kind, crd in CRDS.items():
        assert crd["spec"]["scope"] == "Namespaced"
        assert crd["spec"]["names"]["listKind"] == f"{kind}List"
        assert _version(kind)["served"] is True and _version(kind)["storage"] is True


@pytest.mark.parametrize("kind", CRDS)
def test_crd_is_smaller_than_the_annotation_limit(kind: str) -> None:
    assert serialized_size(CRDS[kind]) < MAX_CRD_BYTES
    assert len(dump(CRDS[kind]).encode()) < MAX_CRD_BYTES


# An enum value '' (TFJob successPolicy) and the default the API server requires for a
# list-map key that is not required (imagePullSecrets[].name) are values, not empty fields.
ALLOWED_EMPTY_STRINGS = (".enum[0]", ".imagePullSecrets.items.properties.name.default")


@pytest.mark.parametrize("kind", CRDS)
def test_crd_has_no_status_and_no_empty_fields(kind: str) -> None:
    crd = CRDS[kind]
    assert "status" not in crd
    assert "creationTimestamp" not in crd["metadata"]

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


@pytest.mark.parametrize("kind", CRDS)
def test_crd_schema_is_structural(kind: str) -> None:
    root = _version(kind)["schema"]["openAPIV3Schema"]
    for path, node in _nodes(root):
        if node.get("x-kubernetes-int-or-string"):
            assert node.get("anyOf") == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "type" in node, f"{path} has no type"
        if "properties" in node or "additionalProperties" in node:
            assert node["type"] == "object", path
        if "items" in node:
            assert node["type"] == "array", path
        assert "anyOf" not in node and "oneOf" not in node and "allOf" not in node, path


@pytest.mark.parametrize("kind", CRDS)
def test_embedded_pod_template_is_complete_and_trimmed(kind: str) -> None:
    root = _version(kind)["schema"]["openAPIV3Schema"]
    specs = next(
        v for k, v in root["properties"]["spec"]["properties"].items() if k.endswith("ReplicaSpecs")
    )
    template = specs["additionalProperties"]["properties"]["template"]
    pod_spec = template["properties"]["spec"]
    container = pod_spec["properties"]["containers"]["items"]
    # The full PodSpec, not a preserve-unknown-fields placeholder.
    for field in (
        "containers",
        "initContainers",
        "volumes",
        "affinity",
        "tolerations",
        "securityContext",
        "topologySpreadConstraints",
        "resourceClaims",
    ):
        assert field in pod_spec["properties"], field
    assert container["required"] == ["name"]
    assert pod_spec["properties"]["containers"]["x-kubernetes-list-map-keys"] == ["name"]
    assert set(template["properties"]["metadata"]["properties"]) == {
        "annotations",
        "finalizers",
        "generateName",
        "labels",
        "name",
        "namespace",
    }
    defaults = [p for p, n in _nodes(template) if "default" in n]
    # Only list-map keys the API server requires a default for.
    assert sorted(defaults) == sorted(
        [
            ".spec.containers[items].ports[items].protocol",
            ".spec.initContainers[items].ports[items].protocol",
            ".spec.ephemeralContainers[items].ports[items].protocol",
            ".spec.imagePullSecrets[items].name",
        ]
    )
    # Only kubetrain's own one-line description of the template field itself.
    assert [p for p, n in _nodes(template) if "description" in n] == [""]


def test_pytorch_scale_subresource_and_printer_columns() -> None:
    version = _version("PyTorchJob")
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        },
    }
    for kind in CRDS:
        assert {c["name"]: c["jsonPath"] for c in _version(kind)["additionalPrinterColumns"]} == {
            "State": ".status.conditions[-1:].type",
            "Age": ".metadata.creationTimestamp",
            # kubetrain's progress and goodput, with -o wide.
            "Progress": ".status.trainerStatus.progressPercentage",
            "Step": ".status.progress.step",
            "Last-Report": ".status.progress.lastReportTime",
            "Goodput": ".status.goodput.ratio",
        }
    assert _version("TFJob")["subresources"] == {"status": {}}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "PyTorchJob",
            [
                "Master must have exactly 1 replica",
                "[Worker] must be configured if elastic policy is used",
                "minReplicas must be <=",
                "must not be used with spec.nprocPerNode",
                "job name too long",
            ],
        ),
        ("TFJob", ["at most one Chief or Master", "job name too long"]),
        (
            "MPIJob",
            ["exactly one Launcher", "Worker replica spec with at least one", "job name too long"],
        ),
        ("XGBoostJob", ["Master replica spec must be present", "Master replicas must be 1"]),
    ],
)
def test_crd_carries_cel_rules_for_webhook_invariants(kind: str, expected: list[str]) -> None:
    rules = _version(kind)["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
    messages = [r["message"] for r in rules]
    for fragment in expected:
        assert any(fragment in m for m in messages), (fragment, messages)
    assert all(r["rule"] and r["fieldPath"].startswith(".") for r in rules)


EXAMPLE_FILES = ["pytorchjob.yaml", "pytorchjob-elastic.yaml", "tfjob.yaml", "mpijob.yaml"]


@pytest.mark.parametrize("file", EXAMPLE_FILES)
def test_examples_validate_against_their_crd_schema(file: str) -> None:
    cr = example(file)
    errors = list(Draft7Validator(crd_schema(cr["kind"])).iter_errors(cr))
    assert errors == []


def test_rejects_bad_cr_by_crd_schema() -> None:
    bad = set_path(
        pytorch_job(),
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].ports",
        [{"containerPort": "http"}],
    )
    bad = set_path(bad, "spec.runPolicy", {"backoffLimit": -1})
    errors = {
        tuple(e.absolute_path) for e in Draft7Validator(crd_schema("PyTorchJob")).iter_errors(bad)
    }
    assert ("spec", "runPolicy", "backoffLimit") in errors
    assert (
        "spec",
        "pytorchReplicaSpecs",
        "Worker",
        "template",
        "spec",
        "containers",
        0,
        "ports",
        0,
        "containerPort",
    ) in errors


def test_rejects_unknown_kind_for_schema() -> None:
    with pytest.raises(KeyError, match="NoSuchJob"):
        crd_schema("NoSuchJob")
