"""Upstream Trainer and JobSet as local processes: their webhook configurations from the
modules' kustomize JSON patches, their configurations, and what ``UpstreamTrainer``
installs and removes (no cluster: a recording client)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.peer_trainer import (
    JOBSET_NAME_PREFIX,
    WEBHOOK_RESOURCES,
    PeerError,
    UpstreamTrainer,
    jobset_config,
    json_patch,
    trainer_config,
    webhook_configurations,
)
from cluster.kueue import write_serving_certificate
from cluster.tools import ToolDirs, Tools, Versions
from kubetrain.controller.kube import Resource

# Trainer v2.3.0's manifests/base/webhook, cut to one webhook per kind.
TRAINER_MANIFESTS = """
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: defaulter.trainjob.trainer.kubeflow.org
  admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system,
              path: /mutate-trainer-kubeflow-org-v1alpha1-trainjob}
  failurePolicy: Fail
  sideEffects: None
  rules: [{apiGroups: [trainer.kubeflow.org], apiVersions: [v1alpha1],
           operations: [CREATE, UPDATE], resources: [trainjobs]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: validator.clustertrainingruntime.trainer.kubeflow.org
  admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system,
              path: /validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime}
  failurePolicy: Fail
  sideEffects: None
  rules: [{apiGroups: [trainer.kubeflow.org], apiVersions: [v1alpha1],
           operations: [CREATE, UPDATE], resources: [clustertrainingruntimes]}]
"""
TRAINER_KUSTOMIZATION = """
resources: [manifests.yaml]
patches:
  - path: patch_mutating.yaml
    target: {group: admissionregistration.k8s.io, version: v1, kind: MutatingWebhookConfiguration}
  - path: patch_validating.yaml
    target: {group: admissionregistration.k8s.io, version: v1,
             kind: ValidatingWebhookConfiguration}
"""
TRAINER_PATCH_MUTATING = """
- op: replace
  path: /webhooks/0/clientConfig/service/name
  value: kubeflow-trainer-controller-manager
- op: replace
  path: /metadata/name
  value: defaulter.trainer.kubeflow.org
"""
TRAINER_PATCH_VALIDATING = """
- op: replace
  path: /metadata/name
  value: validator.trainer.kubeflow.org
- op: add
  path: /webhooks/0/objectSelector
  value:
    matchExpressions:
      - {key: trainer.kubeflow.org/webhook-validation, operator: NotIn, values: [disabled]}
"""
# JobSet v0.12.0's config/components/webhook: the pod webhook is replaced whole.
JOBSET_MANIFESTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mjobset.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system,
              path: /mutate-jobset-x-k8s-io-v1alpha2-jobset}
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
"""
JOBSET_KUSTOMIZATION = """
resources: [manifests.yaml, service.yaml]
patches:
- path: patches/mutating-patch.yaml
  target: {group: admissionregistration.k8s.io, version: v1,
           kind: MutatingWebhookConfiguration, name: mutating-webhook-configuration}
"""
JOBSET_PATCH = """
- op: replace
  path: /webhooks/1
  value:
    name: mpod.kb.io
    clientConfig:
      service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
    objectSelector:
      matchExpressions: [{key: jobset.sigs.k8s.io/jobset-name, operator: Exists}]
"""


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def _trainer_webhooks(root: Path) -> Path:
    return _write(
        root / "trainer" / "webhook",
        {
            "manifests.yaml": TRAINER_MANIFESTS,
            "kustomization.yaml": TRAINER_KUSTOMIZATION,
            "patch_mutating.yaml": TRAINER_PATCH_MUTATING,
            "patch_validating.yaml": TRAINER_PATCH_VALIDATING,
        },
    )


def _jobset_webhooks(root: Path) -> Path:
    # make peer-tools flattens patches/ into the webhook directory.
    return _write(
        root / "jobset" / "webhook",
        {
            "manifests.yaml": JOBSET_MANIFESTS,
            "kustomization.yaml": JOBSET_KUSTOMIZATION,
            "mutating-patch.yaml": JOBSET_PATCH,
        },
    )


def test_json_patch_adds_replaces_and_removes_members_and_elements() -> None:
    document = {"a": {"b/c": 1, "list": [1, 2, 3]}, "gone": True}
    patched = json_patch(
        document,
        [
            {"op": "replace", "path": "/a/b~1c", "value": 2},
            {"op": "add", "path": "/a/list/1", "value": 9},
            {"op": "add", "path": "/a/list/-", "value": 4},
            {"op": "remove", "path": "/a/list/0"},
            {"op": "add", "path": "/a/new", "value": {"x": [1]}},
            {"op": "remove", "path": "/gone"},
        ],
    )
    assert patched == {"a": {"b/c": 2, "list": [9, 2, 3, 4], "new": {"x": [1]}}}
    assert document == {"a": {"b/c": 1, "list": [1, 2, 3]}, "gone": True}  # a copy


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"op": "move", "path": "/a", "from": "/b"}, "expected add, replace or remove"),
        ({"op": "replace", "path": "/missing", "value": 1}, "no such member"),
        ({"op": "remove", "path": "/list/5"}, "no such element"),
        ({"op": "add", "path": "a", "value": 1}, "does not start with '/'"),
    ],
    ids=["move", "replace-missing", "remove-out-of-range", "relative-path"],
)
def test_json_patch_rejects_what_it_cannot_apply(operation: dict[str, Any], message: str) -> None:
    with pytest.raises(PeerError, match=message):
        json_patch({"a": 1, "list": [1]}, [operation])


def test_trainer_webhooks_are_patched_as_kustomize_does_and_served_at_the_url(
    tmp_path: Path,
) -> None:
    configurations = webhook_configurations(
        _trainer_webhooks(tmp_path), base_url="https://127.0.0.1:9443/", ca_bundle="Q0E="
    )
    by_name = {obj["metadata"]["name"]: obj for obj in configurations}
    assert set(by_name) == {"defaulter.trainer.kubeflow.org", "validator.trainer.kubeflow.org"}
    mutating = by_name["defaulter.trainer.kubeflow.org"]["webhooks"][0]
    assert mutating["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "caBundle": "Q0E=",
    }
    assert mutating["failurePolicy"] == "Fail"
    validating = by_name["validator.trainer.kubeflow.org"]["webhooks"][0]
    assert validating["objectSelector"]["matchExpressions"][0]["operator"] == "NotIn"
    assert validating["clientConfig"]["url"].endswith("-clustertrainingruntime")


def test_jobset_webhooks_take_the_named_target_patch_and_the_release_prefix(
    tmp_path: Path,
) -> None:
    (configuration,) = webhook_configurations(
        _jobset_webhooks(tmp_path),
        base_url="https://127.0.0.1:1234",
        ca_bundle="Q0E=",
        name_prefix=JOBSET_NAME_PREFIX,
    )
    assert configuration["metadata"]["name"] == "jobset-mutating-webhook-configuration"
    jobset, pod = configuration["webhooks"]
    assert jobset["clientConfig"]["url"] == (
        "https://127.0.0.1:1234/mutate-jobset-x-k8s-io-v1alpha2-jobset"
    )
    # The pod webhook only sees pods of a JobSet: kubetrain's TrainJob pods carry the label
    # too, which is why the configurations are removed before kubetrain runs.
    assert pod["objectSelector"]["matchExpressions"] == [
        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}
    ]
    assert pod["clientConfig"]["url"] == "https://127.0.0.1:1234/mutate--v1-pod"


def test_a_patch_that_targets_nothing_is_an_error(tmp_path: Path) -> None:
    webhook_dir = _jobset_webhooks(tmp_path)
    text = JOBSET_KUSTOMIZATION.replace("name: mutating-webhook-configuration", "name: other")
    (webhook_dir / "kustomization.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(PeerError, match="targets no object"):
        webhook_configurations(webhook_dir, base_url="https://127.0.0.1:1", ca_bundle="")


SHIPPED_TRAINER = {
    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081", "readinessEndpointName": "readyz"},
    "metrics": {"bindAddress": ":8443", "secureServing": True},
    "webhook": {"port": 9443, "host": ""},
    "leaderElection": {"leaderElect": True, "resourceName": "trainer.kubeflow.org"},
    "controller": {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": 5}},
    "certManagement": {"enable": True, "webhookServiceName": "svc"},
    "clientConnection": {"qps": 50, "burst": 100},
}
PORTS = {"webhook": 1001, "metrics": 1002, "health": 1003}


def test_trainer_config_binds_localhost_without_leader_election_or_cert_rotation() -> None:
    config = trainer_config(SHIPPED_TRAINER, ports=PORTS)
    assert config["webhook"] == {"port": 1001, "host": "127.0.0.1"}
    assert config["metrics"] == {"bindAddress": "127.0.0.1:1002", "secureServing": True}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:1003"
    assert config["leaderElection"]["leaderElect"] is False
    assert config["certManagement"]["enable"] is False
    # Upstream's own settings stay: the workers per kind and the client's QPS/burst.
    assert config["controller"] == SHIPPED_TRAINER["controller"]
    assert config["clientConnection"] == {"qps": 50, "burst": 100}
    assert SHIPPED_TRAINER["webhook"] == {"port": 9443, "host": ""}  # not changed in place


def test_trainer_config_takes_the_equal_settings() -> None:
    config = trainer_config(SHIPPED_TRAINER, ports=PORTS, qps=500, burst=1000)
    assert config["clientConnection"] == {"qps": 500, "burst": 1000}


def test_jobset_config_binds_localhost_with_the_certificate_directory(tmp_path: Path) -> None:
    shipped = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": True},
        "internalCertManagement": {"enable": True},
    }
    config = jobset_config(shipped, ports=PORTS, cert_dir=tmp_path)
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1001, "certDir": str(tmp_path)}
    assert config["metrics"] == {"bindAddress": "127.0.0.1:1002", "certDir": str(tmp_path)}
    assert config["health"] == {"healthProbeBindAddress": "127.0.0.1:1003"}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}
    assert "clientConnection" not in config  # its defaults, or the flags


class RecordingApi:
    def __init__(self) -> None:
        self.applied: list[tuple[str, dict[str, Any]]] = []
        self.deleted: list[tuple[str, str]] = []

    def apply(self, obj: dict[str, Any], *, resource: Resource) -> dict[str, Any]:
        self.applied.append((resource.plural, obj))
        return obj

    def delete(self, resource: Resource, namespace: str | None, name: str) -> bool:
        self.deleted.append((resource.plural, name))
        return True


def test_webhooks_point_at_each_server_and_are_removed_on_stop(tmp_path: Path) -> None:
    _trainer_webhooks(tmp_path)
    _jobset_webhooks(tmp_path)
    dirs = ToolDirs.for_versions(Versions.pinned())
    tools = Tools(
        versions=Versions.pinned(),
        dirs=ToolDirs(
            **{**vars(dirs), "trainer": tmp_path / "trainer", "jobset": tmp_path / "jobset"}
        ),
    )
    api = RecordingApi()
    upstream = UpstreamTrainer(api, tmp_path / "kubeconfig", tools, tmp_path)  # type: ignore[arg-type]
    serving = write_serving_certificate(tmp_path / "certs")
    upstream._install_webhooks(serving, trainer=2001, jobset=2002)
    urls = {
        obj["metadata"]["name"]: [w["clientConfig"]["url"] for w in obj["webhooks"]]
        for _, obj in api.applied
    }
    assert urls["defaulter.trainer.kubeflow.org"][0].startswith("https://127.0.0.1:2001/")
    assert (
        urls["jobset-mutating-webhook-configuration"][1] == "https://127.0.0.1:2002/mutate--v1-pod"
    )
    bundles = {w["clientConfig"]["caBundle"] for _, obj in api.applied for w in obj["webhooks"]}
    assert {base64.b64decode(bundle) for bundle in bundles} == {serving.ca_pem}
    assert [plural for plural, _ in api.applied] == [
        WEBHOOK_RESOURCES["MutatingWebhookConfiguration"].plural,
        WEBHOOK_RESOURCES["ValidatingWebhookConfiguration"].plural,
        WEBHOOK_RESOURCES["MutatingWebhookConfiguration"].plural,
    ]
    upstream.stop()
    assert api.deleted == [
        ("mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org"),
        ("validatingwebhookconfigurations", "validator.trainer.kubeflow.org"),
        ("mutatingwebhookconfigurations", "jobset-mutating-webhook-configuration"),
    ]
    upstream.stop()  # nothing left to remove
    assert len(api.deleted) == 3
    assert yaml.safe_dump(api.applied[0][1])  # plain data, as the API takes it
