"""``TrainingNetworkPolicy``: NetworkPolicies that close a training namespace (a GPU pool's
by default) to everything but what distributed training needs.

- ``kubetrain-default-deny`` selects every pod of the namespace for ingress and egress
  and allows nothing: what no other policy allows is refused.
- ``kubetrain-training`` lets the namespace's pods reach each other on every port (the
  ranks of a job talk over NCCL, gloo, MPI's SSH and rendezvous ports chosen at run
  time), resolve names at the cluster DNS (``kube-system`` pods labelled
  ``k8s-app: kube-dns``, UDP and TCP 53), and open the connections ``egress`` lists
  (object stores with datasets and checkpoints, a package mirror, a tracker).
- ``kubetrain-api-server`` lets the pods that call the API server (the node tuners)
  reach ``api_server_cidrs`` on ``api_server_ports``; no other pod there needs it (job and
  preflight pods run without a ServiceAccount token).

NetworkPolicies do not apply to pods on the host network (most network plugins), and
kubelet probes from the pod's own node stay allowed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.constructs.objects import api_object

PROTOCOLS = ("TCP", "UDP", "SCTP")
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS: Mapping[str, str] = {"k8s-app": "kube-dns"}
"""The label CoreDNS and kube-dns pods carry on kubeadm, GKE, EKS and AKS clusters."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def check_cidrs(prop: str, cidrs: tuple[str, ...]) -> None:
    """Raise unless ``cidrs`` is a non-empty tuple of CIDRs."""
    if not cidrs:
        raise ValueError(f"{prop} is empty: give at least one CIDR, e.g. 10.0.0.0/16")
    for cidr in cidrs:
        try:
            ipaddress.ip_network(cidr)
        except ValueError as err:
            raise ValueError(
                f"{prop} ({cidr!r}) must be CIDRs with no host bits set, e.g. 10.0.0.0/16: {err}"
            ) from None


def check_ports(prop: str, ports: tuple[int, ...]) -> None:
    """Raise unless ``ports`` is a non-empty tuple of ports 1 to 65535."""
    bad = [p for p in ports if not 1 <= p <= 65535]
    if bad or not ports:
        shown = ", ".join(map(str, ports)) or "empty"
        raise ValueError(f"{prop} ({shown}) must be ports from 1 to 65535, at least one")


@dataclass(frozen=True, kw_only=True)
class Egress:
    """Connections a training namespace's pods may open to addresses outside the cluster's
    pods, e.g. an object store: ``Egress(cidrs=("52.216.0.0/15",))``."""

    cidrs: tuple[str, ...]
    """Destination addresses (CIDRs). Required."""
    ports: tuple[int, ...] = (443,)
    """Destination ports. Default: 443 (HTTPS) only."""
    protocol: str = "TCP"
    """TCP, UDP or SCTP. Default: TCP."""

    def __post_init__(self) -> None:
        check_cidrs("egress cidrs", self.cidrs)
        check_ports("egress ports", self.ports)
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"egress protocol ({self.protocol!r}) must be one of {', '.join(PROTOCOLS)}"
            )

    def rule(self) -> dict[str, Any]:
        return {
            "to": [{"ipBlock": {"cidr": cidr}} for cidr in self.cidrs],
            "ports": [{"port": port, "protocol": self.protocol} for port in self.ports],
        }


@dataclass(frozen=True, kw_only=True)
class TrainingNetwork:
    """What a training namespace's pods may reach besides each other and the cluster DNS
    (``GpuNodePoolProps.network_policy``)."""

    egress: tuple[Egress, ...] = ()
    """Further connections out of the namespace, e.g. the object store with the datasets
    and checkpoints. Default: none (a job reaches only its namespace's pods and the DNS);
    for NodeLocal DNSCache add ``Egress(cidrs=("169.254.20.10/32",), ports=(53,),
    protocol="UDP")`` and the same with TCP."""
    api_server_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    """Addresses the node tuners may reach the API server at, on ``api_server_ports``
    only. Default: any address; narrow it to the control plane's, e.g. 10.0.0.10/32."""
    api_server_ports: tuple[int, ...] = (443, 6443)
    """Ports of the API server (the ``kubernetes`` Service's 443 and the endpoints' 6443,
    as network plugins match before or after the Service translation)."""

    def __post_init__(self) -> None:
        check_cidrs("api_server_cidrs", self.api_server_cidrs)
        check_ports("api_server_ports", self.api_server_ports)
        seen: set[Egress] = set()
        for index, item in enumerate(self.egress):
            if item in seen:
                raise ValueError(f"egress[{index}] ({item!r}) is given twice: drop one")
            seen.add(item)


@dataclass(frozen=True, kw_only=True)
class TrainingNetworkPolicyProps:
    """Props of :class:`TrainingNetworkPolicy`."""

    namespace: str
    network: TrainingNetwork = field(default_factory=TrainingNetwork)
    """What the pods may reach. Default: each other and the cluster DNS (tuners: the API
    server)."""
    api_clients: Mapping[str, str] | None = None
    """Labels of the pods that call the API server. Default: none (no pod of the
    namespace may reach it)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels on the policies. Default: none."""


class TrainingNetworkPolicy(constructs.Construct):
    """Child ids: ``DefaultDeny``, ``Training`` and ``ApiServer`` (with ``api_clients``)."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: TrainingNetworkPolicyProps
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        both = ["Ingress", "Egress"]
        api_object(self, "DefaultDeny", self._policy("kubetrain-default-deny", {}, both))
        same_namespace: dict[str, Any] = {"podSelector": {}}
        dns = {
            "to": [
                {
                    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: DNS_NAMESPACE}},
                    "podSelector": {"matchLabels": dict(DNS_POD_LABELS)},
                }
            ],
            "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
        }
        training = self._policy("kubetrain-training", {}, both)
        training["spec"]["ingress"] = [{"from": [same_namespace]}]
        training["spec"]["egress"] = [
            {"to": [same_namespace]},
            dns,
            *(item.rule() for item in props.network.egress),
        ]
        api_object(self, "Training", training)
        if props.api_clients is not None:
            network = props.network
            api_server = Egress(cidrs=network.api_server_cidrs, ports=network.api_server_ports)
            selector = {"matchLabels": dict(props.api_clients)}
            policy = self._policy("kubetrain-api-server", selector, ["Egress"])
            policy["spec"]["egress"] = [api_server.rule()]
            api_object(self, "ApiServer", policy)

    def _policy(self, name: str, pod_selector: dict[str, Any], types: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {
                "name": name,
                "namespace": self.props.namespace,
                "labels": dict(self.props.labels),
            },
            "spec": {"podSelector": pod_selector, "policyTypes": types},
        }
