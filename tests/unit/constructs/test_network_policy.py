"""TrainingNetworkPolicy, alone and as a GpuNodePool emits it for its namespace: deny by
default in both directions, then exactly the allowances training needs (the namespace's
own pods, DNS, the node tuners to the API server, the egress given as props)."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.network_policy import (
    Egress,
    TrainingNetwork,
    TrainingNetworkPolicy,
    TrainingNetworkPolicyProps,
)
from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.types import Image
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid

TUNER = Image("ghcr.io/kubetrain/operator:0.1.0")
DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
}
OBJECT_STORE = Egress(cidrs=("52.216.0.0/15", "3.5.0.0/19"))


def chart() -> cdk8s.Chart:
    return cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)


def pool_policies(**overrides: Any) -> dict[str, dict[str, Any]]:
    values: dict[str, Any] = {
        "name": "h100-ib",
        "profile": NcclProfile.infiniband(hcas=("ibp",)),
        "tuner_image": TUNER,
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "preflight_nodes": 0,
        **overrides,
    }
    scope = chart()
    GpuNodePool(scope, "H100", GpuNodePoolProps(**values))
    objs = [o for o in manifests(scope) if o["kind"] == "NetworkPolicy"]
    assert_valid(objs)
    return {o["metadata"]["name"]: o for o in objs}


def test_pool_namespace_denies_every_connection_by_default() -> None:
    policies = pool_policies()
    assert sorted(policies) == [
        "kubetrain-api-server",
        "kubetrain-default-deny",
        "kubetrain-training",
    ]
    assert {p["metadata"]["namespace"] for p in policies.values()} == {"kubetrain-gpu"}
    deny = policies["kubetrain-default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_pool_namespace_allows_its_own_pods_and_dns_and_nothing_else() -> None:
    spec = pool_policies()["kubetrain-training"]["spec"]
    assert spec["podSelector"] == {} and spec["policyTypes"] == ["Ingress", "Egress"]
    # Ranks reach each other on every port (NCCL, gloo, MPI's SSH, rendezvous): from and
    # to pods of this namespace only.
    assert spec["ingress"] == [{"from": [{"podSelector": {}}]}]
    assert spec["egress"] == [{"to": [{"podSelector": {}}]}, DNS]


def test_only_the_node_tuners_reach_the_api_server_on_its_ports() -> None:
    spec = pool_policies()["kubetrain-api-server"]["spec"]
    assert spec == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "node-tuner"}},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
                "ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}],
            }
        ],
    }
    narrowed = pool_policies(
        network_policy=TrainingNetwork(api_server_cidrs=("10.0.0.10/32",), api_server_ports=(6443,))
    )["kubetrain-api-server"]["spec"]["egress"]
    assert narrowed == [
        {
            "to": [{"ipBlock": {"cidr": "10.0.0.10/32"}}],
            "ports": [{"port": 6443, "protocol": "TCP"}],
        }
    ]


def test_training_egress_prop_adds_exactly_its_destinations() -> None:
    node_local_dns = Egress(cidrs=("169.254.20.10/32",), ports=(53,), protocol="UDP")
    network = TrainingNetwork(egress=(OBJECT_STORE, node_local_dns))
    spec = pool_policies(network_policy=network)["kubetrain-training"]["spec"]
    assert spec["egress"][2:] == [
        {
            "to": [{"ipBlock": {"cidr": "52.216.0.0/15"}}, {"ipBlock": {"cidr": "3.5.0.0/19"}}],
            "ports": [{"port": 443, "protocol": "TCP"}],
        },
        {
            "to": [{"ipBlock": {"cidr": "169.254.20.10/32"}}],
            "ports": [{"port": 53, "protocol": "UDP"}],
        },
    ]


def test_no_policies_without_the_namespace_or_with_network_policy_none() -> None:
    assert pool_policies(network_policy=None) == {}
    assert pool_policies(create_namespace=False) == {}


def test_standalone_policy_for_another_namespace_is_deterministic() -> None:
    def render() -> str:
        scope = chart()
        TrainingNetworkPolicy(
            scope,
            "Team",
            TrainingNetworkPolicyProps(
                namespace="team-a", network=TrainingNetwork(egress=(OBJECT_STORE,))
            ),
        )
        return dump_all(manifests(scope))

    text = render()
    assert text == render()
    scope = chart()
    TrainingNetworkPolicy(scope, "Team", TrainingNetworkPolicyProps(namespace="team-a"))
    objs = manifests(scope)
    assert_valid(objs)
    # Without api_clients no pod of the namespace may reach the API server.
    assert [o["metadata"]["name"] for o in objs] == [
        "kubetrain-default-deny",
        "kubetrain-training",
    ]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Egress(cidrs=()), r"egress cidrs is empty"),
        (lambda: Egress(cidrs=("10.0.0.1/16",)), r"egress cidrs \('10.0.0.1/16'\) must be CIDRs"),
        (lambda: Egress(cidrs=("s3",)), r"egress cidrs \('s3'\) must be CIDRs"),
        (
            lambda: Egress(cidrs=("10.0.0.0/8",), ports=(0,)),
            r"egress ports \(0\) must be ports from 1 to 65535",
        ),
        (
            lambda: Egress(cidrs=("10.0.0.0/8",), protocol="ICMP"),
            r"egress protocol \('ICMP'\) must be one of TCP, UDP, SCTP",
        ),
        (
            lambda: TrainingNetwork(egress=(OBJECT_STORE, OBJECT_STORE)),
            r"egress\[1\] .* is given twice",
        ),
        (lambda: TrainingNetwork(api_server_cidrs=()), r"api_server_cidrs is empty"),
        (lambda: TrainingNetwork(api_server_ports=()), r"api_server_ports \(empty\) must be"),
        (
            lambda: GpuNodePoolProps(
                name="h100-ib",
                profile=NcclProfile.tcp(),
                tuner_image=TUNER,
                gpu_product="NVIDIA-H100-80GB-HBM3",
                preflight_nodes=0,
                create_namespace=False,
                network_policy=TrainingNetwork(egress=(OBJECT_STORE,)),
            ),
            r"network_policy .* is emitted with the namespace, but create_namespace is False",
        ),
    ],
    ids=[
        "no-cidrs",
        "host-bits",
        "not-a-cidr",
        "port-zero",
        "icmp",
        "duplicate-egress",
        "no-api-server-cidrs",
        "no-api-server-ports",
        "custom-policy-without-namespace",
    ],
)
def test_fails_with_the_prop_and_value(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()
