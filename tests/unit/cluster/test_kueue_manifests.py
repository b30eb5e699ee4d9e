"""The pure parts of running Kueue locally: its webhook configurations and CRDs generated
from the manifests and kustomize patches of its module (here in the shape Kueue's
releases have; tests/integration checks the real files), its configuration file, and the
serving certificate, checked with a real TLS handshake."""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from cluster.kueue import (
    DISABLED_FEATURES,
    TRAINER_RUNTIME_CRDS,
    TRAINJOB_CRD,
    KueueError,
    check_trainjob_crds,
    crd_manifests,
    kueue_config,
    webhook_configurations,
    write_serving_certificate,
)
from kubetrain.manifest import parse_yaml

BASE_URL = "https://127.0.0.1:9443"
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()

WEBHOOK_MANIFESTS = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}
  failurePolicy: Fail
  name: mjob.kb.io
  rules:
  - {apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-kueue-x-k8s-io-v1beta2-clusterqueue
  failurePolicy: Fail
  name: vclusterqueue.kb.io
  rules:
  - apiGroups: [kueue.x-k8s.io]
    apiVersions: [v1beta2]
    operations: [CREATE, UPDATE]
    resources: [clusterqueues]
  sideEffects: None
"""

WEBHOOK_KUSTOMIZATION = """\
resources:
- manifests.yaml
patches:
- patch: |-
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingWebhookConfiguration
    metadata:
      name: mutating-webhook-configuration
    webhooks:
    - name: mpod.kb.io
      namespaceSelector:
        matchExpressions:
        - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kueue-system]}
"""

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.kueue.x-k8s.io
spec:
  group: kueue.x-k8s.io
  names: {{kind: {kind}, plural: {plural}}}
  scope: Cluster
  versions: []
"""

CONVERSION_PATCH = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterqueues.kueue.x-k8s.io
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {namespace: system, name: webhook-service, path: /convert}
      conversionReviewVersions: [v1]
"""


@pytest.fixture
def webhook_dir(tmp_path: Path) -> Path:
    (tmp_path / "manifests.yaml").write_text(WEBHOOK_MANIFESTS)
    (tmp_path / "kustomization.yaml").write_text(WEBHOOK_KUSTOMIZATION)
    return tmp_path


def _by_name(configurations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        webhook["name"]: webhook
        for configuration in configurations
        for webhook in configuration["webhooks"]
    }


def test_webhooks_point_at_the_local_url_with_the_ca(webhook_dir: Path) -> None:
    configurations = webhook_configurations(
        webhook_dir, base_url=BASE_URL, ca_bundle=CA_BUNDLE, name_prefix="kueue-"
    )
    assert [(c["kind"], c["metadata"]["name"]) for c in configurations] == [
        ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
    ]
    webhooks = _by_name(configurations)
    assert webhooks["mjob.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-batch-v1-job",
        "caBundle": CA_BUNDLE,
    }
    assert webhooks["vclusterqueue.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        "caBundle": CA_BUNDLE,
    }
    # Everything else is upstream's, unchanged.
    assert webhooks["mjob.kb.io"]["failurePolicy"] == "Fail"
    assert webhooks["mjob.kb.io"]["rules"] == [
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["jobs"],
        }
    ]


def test_kustomize_patches_add_the_namespace_selectors(webhook_dir: Path) -> None:
    webhooks = _by_name(webhook_configurations(webhook_dir, base_url=BASE_URL, ca_bundle=CA_BUNDLE))
    assert webhooks["mpod.kb.io"]["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kueue-system"],
            }
        ]
    }
    assert "namespaceSelector" not in webhooks["mjob.kb.io"]


def test_rejects_a_patch_for_a_webhook_the_manifests_lack(webhook_dir: Path) -> None:
    kustomization = parse_yaml(WEBHOOK_KUSTOMIZATION)
    kustomization["patches"][0]["patch"] = kustomization["patches"][0]["patch"].replace(
        "mpod.kb.io", "mdeployment.kb.io"
    )
    (webhook_dir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    with pytest.raises(
        KueueError,
        match=r"patches webhook 'mdeployment.kb.io' of .* expected one of mjob.kb.io, mpod.kb.io",
    ):
        webhook_configurations(webhook_dir, base_url=BASE_URL, ca_bundle=CA_BUNDLE)


def test_rejects_a_webhook_without_a_service_path(webhook_dir: Path) -> None:
    (webhook_dir / "manifests.yaml").write_text(
        WEBHOOK_MANIFESTS.replace(", path: /mutate-batch-v1-job", "")
    )
    with pytest.raises(KueueError, match=r"webhook mjob.kb.io .* expected a service with a path"):
        webhook_configurations(webhook_dir, base_url=BASE_URL, ca_bundle=CA_BUNDLE)


def test_conversion_webhooks_point_at_the_local_url(tmp_path: Path) -> None:
    crds = []
    for kind, plural in (("ClusterQueue", "clusterqueues"), ("ResourceFlavor", "resourceflavors")):
        path = tmp_path / f"kueue.x-k8s.io_{plural}.yaml"
        path.write_text(CRD.format(kind=kind, plural=plural))
        crds.append(path)
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "webhook_in_clusterqueues.yaml").write_text(CONVERSION_PATCH)
    (patches / "kustomization.yaml").write_text(
        "resources: []\npatches:\n- path: patches/webhook_in_clusterqueues.yaml\n"
    )
    out = {
        crd["metadata"]["name"]: crd
        for crd in crd_manifests(crds, patches, base_url=BASE_URL, ca_bundle=CA_BUNDLE)
    }
    assert out["clusterqueues.kueue.x-k8s.io"]["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:9443/convert", "caBundle": CA_BUNDLE},
            "conversionReviewVersions": ["v1"],
        },
    }
    # Not listed in the kustomization: no conversion webhook.
    assert "conversion" not in out["resourceflavors.kueue.x-k8s.io"]["spec"]


def test_rejects_a_conversion_patch_for_an_unknown_crd(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "webhook_in_clusterqueues.yaml").write_text(CONVERSION_PATCH)
    (tmp_path / "patches" / "kustomization.yaml").write_text(
        "patches:\n- path: patches/webhook_in_clusterqueues.yaml\n"
    )
    with pytest.raises(KueueError, match=r"patches CRD clusterqueues.kueue.x-k8s.io, which is not"):
        crd_manifests([], tmp_path / "patches", base_url=BASE_URL, ca_bundle=CA_BUNDLE)


def test_config_serves_on_loopback_without_leader_election(tmp_path: Path) -> None:
    config = kueue_config(
        namespace="kueue-system",
        webhook_port=9443,
        metrics_port=8443,
        health_port=8081,
        cert_dir=tmp_path,
        integrations=("batch/job", "kubeflow.org/pytorchjob"),
    )
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": str(tmp_path)}
    assert config["metrics"]["bindAddress"] == "127.0.0.1:8443"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:8081"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["featureGates"] == DISABLED_FEATURES == {"VisibilityOnDemand": False}
    assert config["integrations"]["frameworks"] == ["batch/job", "kubeflow.org/pytorchjob"]


def test_rejects_a_config_without_integrations(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"at least one integration"):
        kueue_config(
            namespace="kueue-system",
            webhook_port=1,
            metrics_port=2,
            health_port=3,
            cert_dir=tmp_path,
            integrations=(),
        )


def test_serving_certificate_is_trusted_for_127_0_0_1(tmp_path: Path) -> None:
    serving = write_serving_certificate(tmp_path / "certs")
    assert base64.b64decode(serving.ca_bundle) == serving.ca_file.read_bytes()
    assert serving.key_file.stat().st_mode & 0o077 == 0, "the key must be private"
    cert = x509.load_pem_x509_certificate(serving.cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]

    # A real handshake: a server with the certificate, a client trusting only the CA.
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(serving.cert_file, serving.key_file)
    client_context = ssl.create_default_context(cafile=str(serving.ca_file))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            connection, _ = listener.accept()
            with server_context.wrap_socket(connection, server_side=True) as tls:
                tls.sendall(b"ok")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.recv(2) == b"ok"
        thread.join(timeout=5)


def test_serving_certificate_is_not_trusted_for_another_name(tmp_path: Path) -> None:
    serving = write_serving_certificate(tmp_path, ip_addresses=("127.0.0.1",), dns_names=())
    cert = x509.load_pem_x509_certificate(serving.cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == []
    with pytest.raises(ValueError, match=r"at least one IP address or DNS name"):
        write_serving_certificate(tmp_path, ip_addresses=(), dns_names=())


def test_trainjob_integration_accepts_trainers_three_crds() -> None:
    check_trainjob_crds([TRAINJOB_CRD, *TRAINER_RUNTIME_CRDS, "jobsets.jobset.x-k8s.io"])


def test_rejects_the_trainjob_integration_without_trainers_runtime_crds() -> None:
    # Kueue would exit at start ("setting index on runtimeClass for TrainingRuntime").
    with pytest.raises(KueueError) as raised:
        check_trainjob_crds([TRAINJOB_CRD])
    message = str(raised.value)
    assert "trainer.kubeflow.org/trainjob integration needs the CRDs" in message, message
    assert message.split("missing: ")[1].startswith(
        "clustertrainingruntimes.trainer.kubeflow.org, trainingruntimes.trainer.kubeflow.org."
    ), message
