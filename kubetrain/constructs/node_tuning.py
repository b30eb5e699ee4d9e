"""``NodeTuner``: the DaemonSet that tunes and checks a GPU pool's nodes (see
:mod:`kubetrain.node_tuner`), with least privilege:

- an init step that only writes the pool's sysctls and exits: root (``/proc/sys`` files
  belong to root) with no capability, no token, and one writable hostPath per sysctl file;
  the host network only when a ``net.*`` sysctl is set (``/proc/sys/net`` shows the
  network namespace of whoever looks it up, and the runtime resolves a hostPath from
  inside the pod's namespaces);
- a long-running checker: non-root, no capability, read-only mounts of the host's
  ``/etc/systemd`` and ``/usr/lib/systemd`` (logind's configuration) and the pod's own
  ``/proc`` and ``/sys``; the only container with a ServiceAccount token;
- a ServiceAccount that may ``patch`` nodes and nothing else, and a
  ValidatingAdmissionPolicy that narrows those patches to the node named in the checker's
  pod-bound token and to ``kubetrain.dev/`` labels and annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.types import Image

TUNER_UID = 65532
"""The non-root user of the node tuner's checker (the operator image's own)."""
TUNER_APP = "node-tuner"
"""``app.kubernetes.io/name`` of every pool's tuner pods."""
HOST_PROC = "/host/proc"
"""Where the init step finds the host's sysctl files (one hostPath each)."""
LOGIND_DIRS = ("/etc/systemd", "/usr/lib/systemd")
"""Host directories the checker reads logind's configuration from (read-only, at
``/host/...``): every systemd host has them. Drop-ins under ``/run/systemd`` and
``/usr/local/lib/systemd`` are not mounted and so not seen."""
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_EXPIRATION_S = 3600
"""Lifetime of the checker's projected token; the kubelet renews it at 80%."""


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
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": self._meta(self.props.name),
                "automountServiceAccountToken": False,
            },
        )
        api_object(
            self,
            "ClusterRole",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": self._meta(self.props.cluster_role_name, namespaced=False),
                # No get, list or watch: the tuner writes its label blind (a merge patch).
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}],
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

    @property
    def host_network(self) -> bool:
        """Whether the pods use the host network: only to set ``net.*`` sysctls."""
        return any(name.startswith("net.") for name in self.props.sysctls)

    def tuner_args(self, phase: str = "check") -> list[str]:
        """The node tuner's command-line arguments for one phase (``apply`` or ``check``)."""
        if phase == "apply":
            args = ["--phase=apply", f"--proc-root={HOST_PROC}"]
        else:
            args = ["--phase=check", "--host-root=/host", "--proc-root=/proc", "--sys-root=/sys"]
            args.append(f"--interval={self.props.interval_s}")
        args += [f"--sysctl={k}={v}" for k, v in sorted(self.props.sysctls.items())]
        if phase == "check" and self.props.require_peermem:
            args.append("--require-peermem")
        return args

    def _sysctl_files(self) -> list[tuple[str, str]]:
        """(volume name, host path) of each sysctl's file, in name order."""
        return [
            (f"sysctl-{index}", "/proc/sys/" + name.replace(".", "/"))
            for index, name in enumerate(sorted(self.props.sysctls))
        ]

    def _container(self, name: str, phase: str, mounts: list[dict[str, Any]]) -> dict[str, Any]:
        env: list[dict[str, Any]] = [{"name": E.PYTHONUNBUFFERED, "value": "1"}]
        if phase == "check":  # the node it labels
            node_name = {"fieldRef": {"fieldPath": "spec.nodeName"}}
            env.insert(0, {"name": "NODE_NAME", "valueFrom": node_name})
        return {
            "name": name,
            "image": str(self.props.image),
            "imagePullPolicy": "IfNotPresent",
            "command": ["python", "-m", "kubetrain.node_tuner"],
            "args": self.tuner_args(phase),
            "env": env,
            "resources": {
                "requests": {"cpu": "10m", "memory": "96Mi"},
                "limits": {"memory": "256Mi"},
            },
            "volumeMounts": mounts,
        }

    def _apply_step(self) -> dict[str, Any]:
        """Writes the sysctls: root, because ``/proc/sys`` files are root's (mode 0644);
        no capability (the kernel checks the file mode; the few handlers that also want
        CAP_SYS_ADMIN, e.g. ``kernel.kptr_restrict``, refuse and are reported as
        ``sysctl-failed``), no privilege, no token, and only the pool's sysctl files
        writable (``File`` hostPaths: a sysctl the kernel lacks keeps the pod from
        starting, with an event naming the path)."""
        mounts = [{"name": v, "mountPath": "/host" + path} for v, path in self._sysctl_files()]
        step = self._container("apply-sysctls", "apply", mounts)
        step["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": False,
            "runAsUser": 0,
            "runAsGroup": 0,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        return step

    def _checker(self) -> dict[str, Any]:
        """Checks and labels: non-root, read-only, logind's configuration and the token."""
        mounts = [
            {"name": _host_volume(path), "mountPath": "/host" + path, "readOnly": True}
            for path in LOGIND_DIRS
        ]
        mounts.append({"name": "kube-api-access", "mountPath": TOKEN_DIR, "readOnly": True})
        checker = self._container("node-tuner", "check", mounts)
        checker["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": TUNER_UID,
            "runAsGroup": TUNER_UID,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        return checker

    def _volumes(self) -> list[dict[str, Any]]:
        volumes: list[dict[str, Any]] = [
            {"name": v, "hostPath": {"path": path, "type": "File"}}
            for v, path in self._sysctl_files()
        ]
        volumes += [
            {"name": _host_volume(path), "hostPath": {"path": path, "type": "Directory"}}
            for path in LOGIND_DIRS
        ]
        # What the kubelet would mount by default, less the namespace file (unused), in
        # the checker only; a bound token, so it names the pod's node.
        token = {"path": "token", "expirationSeconds": TOKEN_EXPIRATION_S}
        ca = {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
        volumes.append(
            {
                "name": "kube-api-access",
                "projected": {"sources": [{"serviceAccountToken": token}, {"configMap": ca}]},
            }
        )
        return volumes

    def _daemon_set(self) -> dict[str, Any]:
        selector = {
            "app.kubernetes.io/name": TUNER_APP,
            "app.kubernetes.io/instance": self.props.pool,
        }
        pod_spec: dict[str, Any] = {
            "serviceAccountName": self.props.name,
            "automountServiceAccountToken": False,
            "nodeSelector": dict(self.props.node_selector),
            "tolerations": [dict(t) for t in self.props.tolerations],
            "containers": [self._checker()],
            "volumes": self._volumes(),
            "terminationGracePeriodSeconds": 5,
        }
        if self.props.sysctls:
            pod_spec["initContainers"] = [self._apply_step()]
        if self.host_network:
            pod_spec["hostNetwork"] = True
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
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


def _host_volume(path: str) -> str:
    """``/etc/systemd`` -> ``host-etc-systemd``."""
    return "host" + path.replace("/", "-")
