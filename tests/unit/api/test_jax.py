"""JAXJob (kubeflow.org/v1): upstream's examples load unchanged, the defaults are
training-operator v1.9.0's (``jax_defaults.go``), its webhook's refusals are kubetrain's,
and the CRD has every field of upstream's (``manifests/base/crds/kubeflow.org_jaxjobs.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import JAXJob, JobValidationError, apply_defaults, crd_for, crd_schema, load_job
from kubetrain.api.jax import INFO as JAX
from kubetrain.cli import main
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import jax_job, set_path, template
from tests.conftest import REPO_ROOT

UPSTREAM = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "jax"
EXAMPLES = sorted(UPSTREAM.rglob("*.yaml"))


def _doc(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = parse_yaml(path.read_text())
    return data


def _errors(job: dict[str, Any]) -> list[str]:
    with pytest.raises(JobValidationError) as caught:
        load_job(job)
    return [str(e) for e in caught.value.errors]


def test_both_upstream_examples_are_here() -> None:
    assert [p.relative_to(UPSTREAM).as_posix() for p in EXAMPLES] == [
        "cpu-demo/demo.yaml",
        "jax-dist-spmd-mnist/jaxjob_dist_spmd_mnist_gloo.yaml",
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_upstream_example_loads_unchanged(path: Path) -> None:
    doc = _doc(path)
    job = load_job(doc, str(path))
    assert isinstance(job, JAXJob)
    assert job.to_wire() == doc
    assert list(job.spec.jax_replica_specs) == ["Worker"]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_kubetrain_validate_accepts_upstream_example(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(path)]) == 0, capsys.readouterr()


def test_defaults_are_upstreams() -> None:
    job = load_job(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "JAXJob",
            "metadata": {"name": "j"},
            "spec": {
                "jaxReplicaSpecs": {
                    "Worker": {
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "sidecar", "image": "s:1"},
                                    {"name": "jax", "image": "j:1"},
                                ]
                            }
                        }
                    }
                }
            },
        }
    )
    wire = apply_defaults(job).to_wire()["spec"]
    assert wire["runPolicy"] == {"cleanPodPolicy": "None", "suspend": False}
    worker = wire["jaxReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 1
    assert worker["restartPolicy"] == "Never"
    sidecar, main_container = worker["template"]["spec"]["containers"]
    assert "ports" not in sidecar
    assert main_container["ports"] == [
        {"name": "jaxjob-port", "containerPort": 6666, "protocol": "TCP"}
    ]


def test_defaults_keep_a_declared_port_and_restart_policy() -> None:
    doc = _doc(UPSTREAM / "cpu-demo" / "demo.yaml")
    doc = set_path(
        doc,
        "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].ports",
        [{"name": "jaxjob-port", "containerPort": 7777}],
    )
    worker = apply_defaults(load_job(doc)).to_wire()["spec"]["jaxReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    ports = worker["template"]["spec"]["containers"][0]["ports"]
    assert [(p["name"], p["containerPort"]) for p in ports] == [("jaxjob-port", 7777)]


# Upstream's webhook (pkg/webhooks/jax/jaxjob_webhook.go) refuses each of these.
REFUSALS = {
    "replica type other than Worker": (
        set_path(jax_job(), "spec.jaxReplicaSpecs.Master", {"template": template("jax")}),
        "spec.jaxReplicaSpecs.Master",
        "replica type must be one of: Worker",
    ),
    "replica type in another letter case": (
        {**jax_job(), "spec": {"jaxReplicaSpecs": {"worker": {"template": template("jax")}}}},
        "spec.jaxReplicaSpecs.worker",
        "replica type must be one of: Worker",
    ),
    "no replica specs": (
        set_path(jax_job(), "spec", {}),
        "spec.jaxReplicaSpecs",
        "required",
    ),
    "no containers": (
        set_path(jax_job(), "spec.jaxReplicaSpecs.Worker.template.spec.containers", []),
        "spec.jaxReplicaSpecs.Worker.template.spec.containers",
        "at least one container",
    ),
    "container without image": (
        set_path(jax_job(), "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].image", ""),
        "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].image",
        "must have an image",
    ),
    "no container named jax": (
        set_path(jax_job(), "spec.jaxReplicaSpecs.Worker.template", template("trainer")),
        "spec.jaxReplicaSpecs.Worker.template.spec.containers",
        "must have at least one container with name jax",
    ),
    "name not a DNS-1035 label": (
        set_path(jax_job(), "metadata.name", "1-jax"),
        "metadata.name",
        "",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_rejects_what_upstreams_webhook_refuses(case: str) -> None:
    job, path, message = REFUSALS[case]
    errors = _errors(job)
    assert any(e.startswith(path) and message in e for e in errors), errors


def test_crd_names_scale_subresource_and_restart_policy_default() -> None:
    crd = crd_for(JAX.kind)
    assert crd["metadata"]["name"] == "jaxjobs.kubeflow.org"
    assert crd["spec"]["names"] == {
        "kind": "JAXJob",
        "listKind": "JAXJobList",
        "plural": "jaxjobs",
        "singular": "jaxjob",
    }
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1"
    # Upstream's CRD has the same scale subresource on the Workers.
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.jaxReplicaSpecs.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        },
    }
    replica = crd_schema(JAX.kind)["properties"]["spec"]["properties"]["jaxReplicaSpecs"]
    assert replica["additionalProperties"]["properties"]["restartPolicy"]["default"] == "Never"


def _paths(schema: Any, path: str = "") -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    yield path
    for key, child in (schema.get("properties") or {}).items():
        yield from _paths(child, f"{path}.{key}")
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            yield from _paths(schema[key], f"{path}{mark}")


#: Every path of upstream v1.9.0's JAXJob CRD schema outside the pod template (whose
#: fields are Kubernetes' own, checked below against the other kinds' template).
UPSTREAM_PATHS = (
    ".apiVersion",
    ".kind",
    ".metadata",
    ".spec",
    ".spec.jaxReplicaSpecs",
    ".spec.jaxReplicaSpecs{}",
    ".spec.jaxReplicaSpecs{}.replicas",
    ".spec.jaxReplicaSpecs{}.restartPolicy",
    ".spec.jaxReplicaSpecs{}.template",
    ".spec.runPolicy",
    ".spec.runPolicy.activeDeadlineSeconds",
    ".spec.runPolicy.backoffLimit",
    ".spec.runPolicy.cleanPodPolicy",
    ".spec.runPolicy.managedBy",
    ".spec.runPolicy.schedulingPolicy",
    ".spec.runPolicy.schedulingPolicy.minAvailable",
    ".spec.runPolicy.schedulingPolicy.minResources",
    ".spec.runPolicy.schedulingPolicy.minResources{}",
    ".spec.runPolicy.schedulingPolicy.priorityClass",
    ".spec.runPolicy.schedulingPolicy.queue",
    ".spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
    ".spec.runPolicy.suspend",
    ".spec.runPolicy.ttlSecondsAfterFinished",
    ".status",
    ".status.completionTime",
    ".status.conditions[]",
    ".status.conditions[].lastTransitionTime",
    ".status.conditions[].lastUpdateTime",
    ".status.conditions[].message",
    ".status.conditions[].reason",
    ".status.conditions[].status",
    ".status.conditions[].type",
    ".status.lastReconcileTime",
    ".status.replicaStatuses{}.active",
    ".status.replicaStatuses{}.failed",
    ".status.replicaStatuses{}.labelSelector.matchExpressions[].key",
    ".status.replicaStatuses{}.labelSelector.matchExpressions[].operator",
    ".status.replicaStatuses{}.labelSelector.matchExpressions[].values[]",
    ".status.replicaStatuses{}.labelSelector.matchLabels{}",
    ".status.replicaStatuses{}.selector",
    ".status.replicaStatuses{}.succeeded",
    ".status.startTime",
)


def _version_schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = crd_for(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_crd_has_every_field_of_upstreams() -> None:
    mine = set(_paths(_version_schema(JAX.kind)))
    assert [p for p in UPSTREAM_PATHS if p not in mine] == []


def test_crd_pod_template_is_the_other_v1_kinds() -> None:
    jax = _version_schema(JAX.kind)["properties"]["spec"]["properties"]["jaxReplicaSpecs"]
    tf = _version_schema("TFJob")["properties"]["spec"]["properties"]["tfReplicaSpecs"]
    template = jax["additionalProperties"]["properties"]["template"]
    assert template == tf["additionalProperties"]["properties"]["template"]
    assert len(list(_paths(template))) > 1000
