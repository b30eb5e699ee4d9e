"""``TrainingOperator``: the operator's Deployment with least-privilege RBAC, metrics
Service, PodDisruptionBudget, NetworkPolicies, cluster-wide a ValidatingAdmissionPolicy
that keeps the operator out of the excluded namespaces, and (serving TrainJobs) the one
that keeps runtimes in use from being deleted while the operator runs.

The operator's flags are rendered from :class:`kubetrain.controller.config.OperatorConfig`
and its RBAC from :func:`kubetrain.controller.rbac.operator_rules`, the same code the
operator runs with, so the manifests and the binary cannot drift.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.api.kinds import TRAINJOB
from kubetrain.constructs.namespace_exclusion import (
    NamespaceExclusionPolicy,
    NamespaceExclusionPolicyProps,
)
from kubetrain.constructs.objects import api_object, metadata
from kubetrain.constructs.operator_rbac import OperatorRbac, OperatorRbacProps
from kubetrain.constructs.runtime_protection import (
    RuntimeProtectionPolicy,
    RuntimeProtectionPolicyProps,
)
from kubetrain.constructs.types import (
    Image,
    Quantity,
    Resources,
    check_dns_label,
    check_labels,
    check_toleration,
)
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.rbac import serves_progress

# A non-root UID/GID that exists in distroless and slim images alike.
OPERATOR_UID = 65532


def _default_resources() -> Resources:
    return Resources(cpu=Quantity.millicores(100), memory=Quantity.mebibytes(256))


@dataclass(frozen=True, kw_only=True)
class TrainingOperatorProps:
    """Props of :class:`TrainingOperator`."""

    image: Image
    """The operator image, pinned by tag or digest. Required."""
    namespace: str = "kubetrain-system"
    """Namespace the operator runs in."""
    create_namespace: bool = True
    """Emit the Namespace, labelled for Pod Security ``restricted``. False when the
    platform manages namespaces."""
    name: str = "kubetrain-operator"
    """Name of the Deployment, ServiceAccount, roles and Service."""
    replicas: int = 1
    """Operator replicas; more than one turns leader election on (only the leader acts)."""
    config: OperatorConfig = field(default_factory=OperatorConfig)
    """The operator's flags (job kinds, watched namespaces, QPS, workers, ports, ...)."""
    watch_namespaces: tuple[str, ...] = ()
    """Shortcut for ``config.namespaces``: watch only these namespaces, with a Role and
    RoleBinding in each instead of a ClusterRole. Default: all namespaces."""
    resources: Resources = field(default_factory=_default_resources)
    """Container resources. Default: 100m CPU and 256Mi memory requested, 256Mi limit."""
    node_selector: dict[str, str] = field(default_factory=dict)
    """Node selector for the operator pods. Default: none."""
    tolerations: tuple[dict[str, Any], ...] = ()
    """Tolerations of the operator pods, in Kubernetes' form (``key``, ``operator``,
    ``value``, ``effect``, ``tolerationSeconds``), e.g. to run on tainted system nodes.
    Default: none."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra labels on every object. Default: none."""
    monitoring_namespace: str | None = "monitoring"
    """The namespace whose pods (Prometheus) may scrape the metrics port; None closes it
    to every pod. The health port stays open for the kubelet's probes."""
    api_server_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    """Addresses the operator may connect to (egress), on ``api_server_ports`` only.
    Default: any address, since the control plane's addresses differ per cluster; set the
    API server's endpoints (``kubectl get endpoints kubernetes``) to close it further."""
    api_server_ports: tuple[int, ...] = (443, 6443)
    """Ports of the API server (the ``kubernetes`` Service's and its endpoints')."""
    found_as_trainer: bool = False
    """Label the operator's pods as upstream Trainer's controller (``app.kubernetes.io/name:
    trainer``, ``app.kubernetes.io/component: manager``) instead of kubetrain's (``name``,
    ``operator``), so tools that find Trainer's controller by its labels find this one (the
    Kubeflow MCP server's ``inspect_controller``). Only when the operator serves TrainJobs.
    The labels are the Deployment's selector, which Kubernetes never changes in place:
    switch an installed operator by deleting its Deployment first (docs/operator.md)."""

    def __post_init__(self) -> None:
        check_dns_label("namespace", self.namespace)
        check_dns_label("name", self.name)
        if not 1 <= self.replicas <= 10:
            raise ValueError(f"replicas ({self.replicas}) must be between 1 and 10")
        if self.resources.gpus:
            raise ValueError(
                f"resources.gpus ({self.resources.gpus}) must be 0: the operator needs no GPU"
            )
        check_labels("node_selector", self.node_selector)
        for index, toleration in enumerate(self.tolerations):
            check_toleration(f"tolerations[{index}]", toleration)
        check_labels("labels", self.labels)
        if self.monitoring_namespace is not None:
            check_dns_label("monitoring_namespace", self.monitoring_namespace)
        if not self.api_server_cidrs:
            raise ValueError("api_server_cidrs is empty: the operator must reach the API server")
        for cidr in self.api_server_cidrs:
            try:
                ipaddress.ip_network(cidr)
            except ValueError:
                raise ValueError(
                    f"api_server_cidrs ({cidr!r}) must be CIDRs, e.g. 10.0.0.1/32"
                ) from None
        bad = [p for p in self.api_server_ports if not 1 <= p <= 65535]
        if bad or not self.api_server_ports:
            raise ValueError(
                f"api_server_ports ({', '.join(map(str, self.api_server_ports)) or 'empty'}) "
                "must be ports between 1 and 65535, e.g. (443, 6443)"
            )
        if (
            self.watch_namespaces
            and self.config.namespaces
            and (tuple(self.watch_namespaces) != self.config.namespaces)
        ):
            raise ValueError(
                f"watch_namespaces ({', '.join(self.watch_namespaces)}) and config.namespaces "
                f"({', '.join(self.config.namespaces)}) disagree: set only one of them"
            )
        if self.found_as_trainer and TRAINJOB.kind not in self.config.kinds:
            raise ValueError(
                f"found_as_trainer (True) needs an operator that serves TrainJobs, as "
                f"Trainer's controller does; config.kinds is {', '.join(self.config.kinds)}"
            )

    @property
    def selector(self) -> dict[str, str]:
        """The labels that select the operator's pods (its Deployment's, Services', ...)."""
        name, component = (
            ("trainer", "manager") if self.found_as_trainer else (self.name, "operator")
        )
        return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component}

    def watching_node_health(
        self, conditions: tuple[str, ...], taints: tuple[str, ...]
    ) -> TrainingOperatorProps:
        """These props with further node conditions and taints that make a node unhealthy
        for training (``config.unhealthy_node_conditions``/``_taints``; a stack adds each
        GPU pool's), each named once."""
        config = dataclasses.replace(
            self.config,
            unhealthy_node_conditions=_union(self.config.unhealthy_node_conditions, conditions),
            unhealthy_node_taints=_union(self.config.unhealthy_node_taints, taints),
        )
        return dataclasses.replace(self, config=config)

    def effective_config(self) -> OperatorConfig:
        """The config the operator runs with: watch_namespaces merged in, and leader
        election on whenever there is more than one replica."""
        config = self.config
        if self.watch_namespaces:
            config = dataclasses.replace(config, namespaces=tuple(self.watch_namespaces))
        if self.replicas > 1 and not config.leader_elect:
            config = dataclasses.replace(config, leader_elect=True)
        if config.progress_server and not config.progress_host:
            # Pods reach the progress server through the construct's Service.
            host = f"{self.name}-progress.{self.namespace}.svc"
            config = dataclasses.replace(config, progress_host=host)
        if config.cluster_wide and self.namespace not in config.exclude_namespaces:
            # The operator's own namespace holds its token and Lease, never a job.
            config = dataclasses.replace(
                config, exclude_namespaces=(*config.exclude_namespaces, self.namespace)
            )
        return config


def _union(first: tuple[str, ...], more: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *more)))


class TrainingOperator(constructs.Construct):
    """The kubetrain operator and everything it needs to run with least privilege.

    Child ids: ``Namespace``, ``ServiceAccount``, ``Rbac`` (an :class:`OperatorRbac`),
    ``ExclusionPolicy`` (a :class:`NamespaceExclusionPolicy`, cluster-wide with excluded
    namespaces), ``RuntimeProtection`` (a :class:`RuntimeProtectionPolicy`, serving
    TrainJobs), ``Resource`` (the Deployment), ``MetricsService``, ``ProgressService``
    (with the progress server), ``DisruptionBudget``, ``NetworkPolicy`` (ingress) and
    ``EgressPolicy``.
    """

    def __init__(self, scope: constructs.Construct, id: str, props: TrainingOperatorProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.config = props.effective_config()
        self.selector = props.selector
        self.labels = {**props.labels, **self.selector, "app.kubernetes.io/part-of": "kubetrain"}
        if props.create_namespace:
            api_object(self, "Namespace", self._namespace())
        api_object(self, "ServiceAccount", self.manifest("v1", "ServiceAccount", {}))
        # The ServiceAccount (and Deployment) every access construct is about.
        name, namespace, labels = props.name, props.namespace, self.labels
        rbac = OperatorRbacProps(name=name, namespace=namespace, config=self.config, labels=labels)
        OperatorRbac(self, "Rbac", rbac)
        if self.config.cluster_wide and self.config.exclude_namespaces:
            exclusion = NamespaceExclusionPolicyProps(
                name=name,
                namespace=namespace,
                excluded_namespaces=self.config.exclude_namespaces,
                lease_name=self.config.leader_election_id,
                secret_name=self.config.progress_secret,
                labels=labels,
            )
            NamespaceExclusionPolicy(self, "ExclusionPolicy", exclusion)
        if TRAINJOB.kind in self.config.kinds:
            protection = RuntimeProtectionPolicyProps(name=name, namespace=namespace, labels=labels)
            RuntimeProtectionPolicy(self, "RuntimeProtection", protection)
        api_object(self, "Resource", self._deployment())
        api_object(self, "MetricsService", self._service())
        if serves_progress(self.config):
            api_object(self, "ProgressService", self._progress_service())
        api_object(self, "DisruptionBudget", self._pdb())
        api_object(self, "NetworkPolicy", self._network_policy())
        api_object(self, "EgressPolicy", self._egress_policy())

    # --- objects -------------------------------------------------------------------

    def meta(self, name: str | None = None, namespace: str | None = "") -> dict[str, Any]:
        ns = self.props.namespace if namespace == "" else namespace
        return metadata(name or self.props.name, self.labels, ns)

    def manifest(
        self, api_version: str, kind: str, body: dict[str, Any], **meta: Any
    ) -> dict[str, Any]:
        return {"apiVersion": api_version, "kind": kind, "metadata": self.meta(**meta), **body}

    def _namespace(self) -> dict[str, Any]:
        obj = self.manifest("v1", "Namespace", {}, name=self.props.namespace, namespace=None)
        for mode in ("enforce", "audit", "warn"):
            obj["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}"] = "restricted"
        return obj

    def _container(self) -> dict[str, Any]:
        config = self.config
        probe = {"periodSeconds": 10, "timeoutSeconds": 2, "failureThreshold": 3}
        return {
            "name": "operator",
            "image": str(self.props.image),
            "imagePullPolicy": "IfNotPresent",
            "command": ["kubetrain", "operator"],
            "args": config.to_args(),
            "env": [
                {
                    "name": "POD_NAMESPACE",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                },
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            "ports": [
                {"name": "metrics", "containerPort": config.metrics_port, "protocol": "TCP"},
                {"name": "health", "containerPort": config.health_port, "protocol": "TCP"},
                *(
                    [{"name": "progress", "containerPort": config.progress_port, "protocol": "TCP"}]
                    if serves_progress(config)
                    else []
                ),
            ],
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": "health"},
                "initialDelaySeconds": 15,
                **probe,
            },
            "readinessProbe": {
                "httpGet": {"path": "/readyz", "port": "health"},
                "initialDelaySeconds": 5,
                **probe,
            },
            "resources": self.props.resources.to_wire(),
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        }

    def _deployment(self) -> dict[str, Any]:
        pod_spec: dict[str, Any] = {
            "serviceAccountName": self.props.name,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": OPERATOR_UID,
                "runAsGroup": OPERATOR_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [self._container()],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
            "terminationGracePeriodSeconds": 30,
        }
        if self.props.node_selector:
            pod_spec["nodeSelector"] = dict(self.props.node_selector)
        if self.props.tolerations:
            pod_spec["tolerations"] = [dict(t) for t in self.props.tolerations]
        if self.props.replicas > 1:
            # Spread replicas so one node failure does not take the leader and its standby.
            pod_spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": dict(self.selector)},
                }
            ]
        return self.manifest(
            "apps/v1",
            "Deployment",
            {
                "spec": {
                    "replicas": self.props.replicas,
                    "selector": {"matchLabels": dict(self.selector)},
                    "template": {
                        "metadata": {
                            "labels": dict(self.labels),
                            # Sidecars keep pods from completing and intercept the API traffic.
                            "annotations": {K.ISTIO_INJECT_ANNOTATION: "false"},
                        },
                        "spec": pod_spec,
                    },
                }
            },
        )

    def _service(self) -> dict[str, Any]:
        return self._port_service("metrics", self.config.metrics_port)

    def _progress_service(self) -> dict[str, Any]:
        """Where trainer pods send progress reports (every replica serves them)."""
        return self._port_service("progress", self.config.progress_port)

    def _port_service(self, port_name: str, port: int) -> dict[str, Any]:
        """Service ``<name>-<port_name>`` in front of every replica's ``port_name`` port."""
        return self.manifest(
            "v1",
            "Service",
            {
                "spec": {
                    "type": "ClusterIP",
                    "selector": dict(self.selector),
                    "ports": [
                        {
                            "name": port_name,
                            "port": port,
                            "targetPort": port_name,
                            "protocol": "TCP",
                        }
                    ],
                }
            },
            name=f"{self.props.name}-{port_name}",
        )

    def _pdb(self) -> dict[str, Any]:
        # One replica: allow the eviction (a drain must not hang); more: keep one up.
        budget = {"minAvailable": 1} if self.props.replicas > 1 else {"maxUnavailable": 1}
        return self.manifest(
            "policy/v1",
            "PodDisruptionBudget",
            {"spec": {"selector": {"matchLabels": dict(self.selector)}, **budget}},
        )

    def _network_policy(self) -> dict[str, Any]:
        """Ingress: the health port from anywhere (the kubelet probes it), the progress
        port from anywhere (trainer pods of every namespace; each report carries a token
        the server checks), the metrics port from the monitoring namespace only, nothing
        else."""
        open_ports = [self.config.health_port]
        if serves_progress(self.config):
            open_ports.append(self.config.progress_port)
        ingress: list[dict[str, Any]] = [
            {"ports": [{"port": port, "protocol": "TCP"} for port in open_ports]}
        ]
        if self.props.monitoring_namespace is not None:
            ingress.append(
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchLabels": {
                                    "kubernetes.io/metadata.name": self.props.monitoring_namespace
                                }
                            }
                        }
                    ],
                    "ports": [{"port": self.config.metrics_port, "protocol": "TCP"}],
                }
            )
        return self.manifest(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            {
                "spec": {
                    "podSelector": {"matchLabels": dict(self.selector)},
                    "policyTypes": ["Ingress"],
                    "ingress": ingress,
                }
            },
        )

    def _egress_policy(self) -> dict[str, Any]:
        """Egress: the API server's ports only (the operator talks to nothing else; it
        reaches the API server by the IP in KUBERNETES_SERVICE_HOST, so no DNS)."""
        return self.manifest(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            {
                "spec": {
                    "podSelector": {"matchLabels": dict(self.selector)},
                    "policyTypes": ["Egress"],
                    "egress": [
                        {
                            "to": [{"ipBlock": {"cidr": c}} for c in self.props.api_server_cidrs],
                            "ports": [
                                {"port": p, "protocol": "TCP"} for p in self.props.api_server_ports
                            ],
                        }
                    ],
                }
            },
            name=f"{self.props.name}-egress",
        )
