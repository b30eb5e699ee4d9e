"""``NodeTuner``: the DaemonSet that tunes and checks a GPU pool's nodes (see
:mod:`kubetrain.node_tuner`), with least privilege: a privileged init step that only sets
sysctls and exits, an unprivileged checker whose ServiceAccount may get and patch nodes,
and a ValidatingAdmissionPolicy that narrows those patches to the node named in the
checker's pod-bound token and to ``kubetrain.dev/`` labels and annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.types import Image

TUNER_UID = 65532
"""The non-root user of the node tuner's checker (the operator image's own)."""


@dataclass(frozen=True, kw_only=True)
class NodeTunerProps:
    """Props of :class:`NodeTuner` (a :class:`~kubetrain.constructs.node_pool.GpuNodePool`
    fills them in from its own)."""

    pool: str
    """The pool's name (the pods' ``app.kubernetes.io/instance``)."""
    name: str
    """Name of the DaemonSet and its ServiceAccount."""
    cluster_role_name: str
    """Name of the ClusterRole, its binding and the admission policy."""
    namespace: str
    image: Image
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    sysctls: Mapping[str, str]
    interval_s: int
    require_peermem: bool
    labels: Mapping[str, str] = field(default_factory=dict)


class NodeTuner(constructs.Construct):
    """Child ids: ``ServiceAccount``, ``ClusterRole``, ``ClusterRoleBinding``,
    ``NodePatchPolicy``, ``NodePatchPolicyBinding`` and ``Resource`` (the DaemonSet)."""

    def __init__(self, scope: constructs.Construct, id: str, props: NodeTunerProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self._rbac()
        self._node_patch_policy()
        api_object(self, "Resource", self._daemon_set())

    def _meta(self, name: str, *, namespaced: bool = True) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": dict(self.props.labels)}
        if namespaced:
            meta["namespace"] = self.props.namespace
        return meta

    @property
    def tuner_user(self) -> str:
        """The user name of the tuner's ServiceAccount tokens."""
        return f"system:serviceaccount:{self.props.namespace}:{self.props.name}"

    def _node_patch_policy(self) -> None:
        """What RBAC cannot say: the tuner may patch only the node its pod runs on (the
        node name bound into its token), and only ``kubetrain.dev/`` labels and
        annotations; taints, spec and every other key stay as they are."""
        keep = f"k.startsWith('{K.KUBETRAIN_PREFIX}/')"
        unchanged_except_ours = (
            "variables.new{0}.all(k, {1} || (k in variables.old{0} && "
            "variables.old{0}[k] == variables.new{0}[k])) && "
            "variables.old{0}.all(k, {1} || k in variables.new{0})"
        )
        policy = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": self._meta(self.props.cluster_role_name, namespaced=False),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["nodes"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "the-node-tuner",
                        "expression": f"request.userInfo.username == '{self.tuner_user}'",
                    }
                ],
                "variables": [
                    {
                        "name": "tokenNode",
                        "expression": "request.userInfo.extra"
                        "[?'authentication.kubernetes.io/node-name'].orValue([])",
                    },
                    {"name": "newLabels", "expression": "object.metadata.?labels.orValue({})"},
                    {"name": "oldLabels", "expression": "oldObject.metadata.?labels.orValue({})"},
                    {
                        "name": "newAnnotations",
                        "expression": "object.metadata.?annotations.orValue({})",
                    },
                    {
                        "name": "oldAnnotations",
                        "expression": "oldObject.metadata.?annotations.orValue({})",
                    },
                ],
                "validations": [
                    {
                        "expression": "object.metadata.name in variables.tokenNode",
                        "reason": "Forbidden",
                        "message": "the node tuner may change only the node its pod runs on",
                    },
                    {
                        "expression": unchanged_except_ours.format("Labels", keep),
                        "reason": "Forbidden",
                        "message": f"the node tuner may change only {K.KUBETRAIN_PREFIX}/ labels",
                    },
                    {
                        "expression": unchanged_except_ours.format("Annotations", keep),
                        "reason": "Forbidden",
                        "message": "the node tuner may change only "
                        f"{K.KUBETRAIN_PREFIX}/ annotations",
                    },
                    {
                        "expression": "object.spec == oldObject.spec && "
                        "object.metadata.?ownerReferences == oldObject.metadata.?ownerReferences "
                        "&& object.metadata.?finalizers == oldObject.metadata.?finalizers",
                        "reason": "Forbidden",
                        "message": "the node tuner may not change a node's spec, owners or "
                        "finalizers",
                    },
                ],
            },
        }
        api_object(self, "NodePatchPolicy", policy)
        binding = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": self._meta(self.props.cluster_role_name, namespaced=False),
            "spec": {"policyName": self.props.cluster_role_name, "validationActions": ["Deny"]},
        }
        api_object(self, "NodePatchPolicyBinding", binding)

    def _rbac(self) -> None:
        api_object(
            self,
            "ServiceAccount",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self._meta(self.props.name)},
        )
        api_object(
            self,
            "ClusterRole",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": self._meta(self.props.cluster_role_name, namespaced=False),
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
            },
        )
        api_object(
            self,
            "ClusterRoleBinding",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": self._meta(self.props.cluster_role_name, namespaced=False),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": self.props.cluster_role_name,
                },
                "subjects": [
                    {
                        "kind": "ServiceAccount",
                        "name": self.props.name,
                        "namespace": self.props.namespace,
                    }
                ],
            },
        )

    def tuner_args(self, phase: str = "check") -> list[str]:
        """The node tuner's command-line arguments for one phase (``apply`` or ``check``)."""
        args = [f"--phase={phase}", "--host-root=/host", "--proc-root=/proc"]
        if phase == "check":
            args.append(f"--interval={self.props.interval_s}")
        args += [f"--sysctl={k}={v}" for k, v in sorted(self.props.sysctls.items())]
        if phase == "check" and self.props.require_peermem:
            args.append("--require-peermem")
        return args

    def _tuner_container(self, name: str, phase: str) -> dict[str, Any]:
        return {
            "name": name,
            "image": str(self.props.image),
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-m", "kubetrain.node_tuner"],
            "args": self.tuner_args(phase),
            "env": [
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "PYTHONUNBUFFERED", "value": "1"},
            ],
            "resources": {
                "requests": {"cpu": "10m", "memory": "96Mi"},
                "limits": {"memory": "256Mi"},
            },
            "volumeMounts": [
                {
                    "name": "host-root",
                    "mountPath": "/host",
                    "readOnly": True,
                    "mountPropagation": "HostToContainer",
                }
            ],
        }

    def _daemon_set(self) -> dict[str, Any]:
        selector = {
            "app.kubernetes.io/name": "node-tuner",
            "app.kubernetes.io/instance": self.props.pool,
        }
        # Only writing host sysctls needs privileges (root, privileged): that step runs
        # once as an init container and exits. The long-running checker, which holds the
        # ServiceAccount token that may label the node, runs unprivileged and non-root.
        apply_step = self._tuner_container("apply-sysctls", "apply")
        apply_step["securityContext"] = {
            "privileged": True,
            "runAsUser": 0,
            "runAsGroup": 0,
            "readOnlyRootFilesystem": True,
        }
        checker = self._tuner_container("node-tuner", "check")
        checker["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": TUNER_UID,
            "runAsGroup": TUNER_UID,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        pod_spec: dict[str, Any] = {
            "serviceAccountName": self.props.name,
            # Host network: net.* sysctls are per network namespace.
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "nodeSelector": dict(self.props.node_selector),
            "tolerations": [dict(t) for t in self.props.tolerations],
            "initContainers": [apply_step],
            "containers": [checker],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}],
            "terminationGracePeriodSeconds": 5,
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": self._meta(self.props.name),
            "spec": {
                "selector": {"matchLabels": selector},
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "10%"},
                },
                "template": {
                    "metadata": {
                        "labels": {**self.props.labels, **selector},
                        "annotations": {K.ISTIO_INJECT_ANNOTATION: "false"},
                    },
                    "spec": pod_spec,
                },
            },
        }
