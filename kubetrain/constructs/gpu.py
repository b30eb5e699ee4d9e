"""``GpuNodePool``: what a pool of GPU nodes needs for NCCL training, and how jobs bind
to it.

The construct emits a privileged node-tuning DaemonSet limited to the pool (see
:mod:`kubetrain.node_tuner`) with its ServiceAccount and a ClusterRole allowing only
``get`` and ``patch`` on nodes, a PriorityClass for training, optionally the ``nvidia``
RuntimeClass, and a preflight nccl-tests MPIJob across ``preflight_nodes`` nodes with the
pool's NCCL profile applied. Job constructs bind their pod templates with :meth:`bind`.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cdk8s
import constructs

from kubetrain.api import JobValidationError, load_job
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.types import Image, check_dns_label, check_labels
from kubetrain.node_tuner import LABEL as TUNING_LABEL
from kubetrain.node_tuner import OK as TUNING_OK
from kubetrain.node_tuner import parse_sysctl

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
POOL_LABEL = "kubetrain.dev/gpu-pool"
DEFAULT_TOPOLOGY_KEY = "topology.kubetrain.dev/block"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RUNTIME_CLASS_NAME = "nvidia"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
DEFAULT_SYSCTLS: Mapping[str, str] = {
    "net.core.rmem_max": "67108864",
    "net.core.wmem_max": "67108864",
}
"""Socket buffer ceilings the tuner raises by default (64 MiB)."""
PREFLIGHT_SSH_PORT = 2222
"""sshd port of host-network preflight workers (port 22 belongs to the node's sshd)."""
TUNER_UID = 65532
"""The non-root user of the node tuner's checker (the operator image's own)."""
PREFLIGHT_MARK = "kubetrain-preflight:"
MAX_POOL_NAME = 40


@dataclass(frozen=True, kw_only=True)
class Taint:
    """A taint the pool's nodes carry; pods bound to the pool tolerate it."""

    key: str
    value: str | None = None
    """Taint value. Default: none (the toleration uses ``Exists``)."""
    effect: str = "NoSchedule"
    """NoSchedule, PreferNoSchedule or NoExecute."""

    def __post_init__(self) -> None:
        check_labels("taint", {self.key: self.value or ""})
        if self.effect not in TAINT_EFFECTS:
            raise ValueError(
                f"taint effect ({self.effect!r}) must be one of {', '.join(TAINT_EFFECTS)}"
            )

    def toleration(self) -> dict[str, str]:
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True, kw_only=True)
class GpuNodePoolProps:
    """Props of :class:`GpuNodePool`."""

    name: str
    """Pool name (DNS label, at most 40 characters); object names derive from it."""
    profile: NcclProfile
    """The pool's NCCL fabric profile. Required."""
    tuner_image: Image
    """Image with the kubetrain package (the operator image) for the node tuner."""
    gpu_product: str | None = None
    """GPU Feature Discovery product label value (``nvidia.com/gpu.product``), e.g.
    ``NVIDIA-H100-80GB-HBM3``. Default: not part of the selector."""
    gpus_per_node: int = 8
    """GPUs on each node; jobs and the preflight take this many per pod."""
    node_labels: dict[str, str] = field(default_factory=dict)
    """Further labels that select the pool's nodes (e.g. a node-pool label of the
    cloud). Default: none. The selector is the profile's node selector, the GPU product
    and these; it must not be empty."""
    taints: tuple[Taint, ...] = ()
    """Taints of the pool's nodes besides ``nvidia.com/gpu:NoSchedule`` (always
    tolerated). Default: none."""
    topology_key: str = DEFAULT_TOPOLOGY_KEY
    """Node label naming the block (rail, rack, IB island) for same-block placement,
    e.g. ``cloud.google.com/gce-topology-block`` or ``ib.coreweave.cloud/leafgroup``.
    Default: ``topology.kubetrain.dev/block``."""
    require_tuned_nodes: bool = False
    """Also select ``kubetrain.dev/node-tuning=ok``: jobs land only on nodes that passed
    the node tuner's checks. Default: off (the tuner only reports)."""
    runtime_class: bool = False
    """Emit the ``nvidia`` RuntimeClass (handler ``nvidia``) and bind pods to it, for
    clusters whose containerd default runtime is not NVIDIA's. Default: off."""
    priority_value: int = 1000
    """Value of the pool's training PriorityClass (0 to 1000000000)."""
    preempting: bool = True
    """Training pods preempt lower-priority pods (``PreemptLowerPriority``); False for
    ``Never``. Default: preempt."""
    namespace: str = "kubetrain-gpu"
    """Namespace of the node tuner and the preflight job."""
    create_namespace: bool = True
    """Emit the namespace, labelled Pod Security ``privileged`` (the tuner and RDMA
    pods need privileges). False when it exists or another pool creates it."""
    sysctls: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SYSCTLS))
    """Sysctls the tuner applies on every node. Default: ``net.core.rmem_max`` and
    ``net.core.wmem_max`` = 64 MiB."""
    tuner_interval_s: int = 300
    """Seconds between the tuner's rounds of checks."""
    preflight_nodes: int = 2
    """Nodes the preflight nccl-tests job spans; 0 disables it."""
    preflight_image: Image | None = None
    """Image with nccl-tests (``all_reduce_perf`` on PATH), OpenMPI and sshd. Required
    when ``preflight_nodes`` > 0."""
    preflight_min_busbw_gbps: float | None = None
    """Fail the preflight when the average bus bandwidth (GB/s) is below this.
    Default: no threshold (the job fails only if nccl-tests fails or NCCL picked the
    wrong network)."""
    preflight_deadline_s: int = 1800
    """``activeDeadlineSeconds`` of the preflight: a hang fails it."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra labels on every object. Default: none."""

    def __post_init__(self) -> None:
        check_dns_label("name", self.name)
        if len(self.name) > MAX_POOL_NAME:
            raise ValueError(
                f"name ({self.name!r}) has {len(self.name)} characters: at most "
                f"{MAX_POOL_NAME}, so that '<name>-preflight-worker-<n>' fits a pod name"
            )
        check_dns_label("namespace", self.namespace)
        if not isinstance(self.profile, NcclProfile):
            raise ValueError(
                f"profile ({self.profile!r}) must be an NcclProfile, e.g. NcclProfile.infiniband()"
            )
        if not 1 <= self.gpus_per_node <= 64:
            raise ValueError(f"gpus_per_node ({self.gpus_per_node}) must be from 1 to 64")
        required = self.profile.required_gpus
        if required and self.gpus_per_node != required:
            raise ValueError(
                f"gpus_per_node ({self.gpus_per_node}) must be {required} for the "
                f"{self.profile.name} profile"
            )
        if self.gpu_product is not None:
            check_labels("gpu_product", {GPU_PRODUCT_LABEL: self.gpu_product})
        check_labels("node_labels", self.node_labels)
        check_labels("labels", self.labels)
        check_labels("topology_key", {self.topology_key: ""})
        if not 0 <= self.priority_value <= 1_000_000_000:
            raise ValueError(
                f"priority_value ({self.priority_value}) must be from 0 to 1000000000 "
                "(higher values are reserved for system classes)"
            )
        for name, value in self.sysctls.items():
            parse_sysctl(f"{name}={value}")
        if self.tuner_interval_s < 10:
            raise ValueError(f"tuner_interval_s ({self.tuner_interval_s}) must be >= 10")
        if self.preflight_nodes < 0:
            raise ValueError(f"preflight_nodes ({self.preflight_nodes}) must be >= 0 (0: none)")
        if self.preflight_nodes and self.preflight_image is None:
            raise ValueError(
                f"preflight_image (None) is required when preflight_nodes "
                f"({self.preflight_nodes}) > 0: give an image with nccl-tests, OpenMPI and "
                "sshd, or set preflight_nodes=0"
            )
        if self.preflight_min_busbw_gbps is not None and self.preflight_min_busbw_gbps <= 0:
            raise ValueError(
                f"preflight_min_busbw_gbps ({self.preflight_min_busbw_gbps}) must be > 0"
            )
        if self.preflight_deadline_s < 60:
            raise ValueError(f"preflight_deadline_s ({self.preflight_deadline_s}) must be >= 60")
        keys = set(self.profile.node_selector) | set(self.node_labels)
        if self.gpu_product is None and not keys:
            raise ValueError(
                f"pool {self.name!r} selects every node: set gpu_product or node_labels"
            )
        for key in sorted(set(self.profile.node_selector) & set(self.node_labels)):
            if self.profile.node_selector[key] != self.node_labels[key]:
                raise ValueError(
                    f"node_labels[{key!r}] ({self.node_labels[key]!r}) contradicts the "
                    f"{self.profile.name} profile's {self.profile.node_selector[key]!r}"
                )


class GpuNodePool(constructs.Construct):
    """A GPU node pool: node selection, tolerations, priority and NCCL profile for the
    jobs bound to it, plus the node tuner and the preflight job.

    Child ids: ``Namespace`` (with ``create_namespace``), ``PriorityClass``,
    ``RuntimeClass`` (with ``runtime_class``), ``ServiceAccount``, ``ClusterRole``,
    ``ClusterRoleBinding``, ``Resource`` (the node-tuner DaemonSet) and ``Preflight``
    (the MPIJob, when ``preflight_nodes`` > 0).
    """

    def __init__(self, scope: constructs.Construct, id: str, props: GpuNodePoolProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.labels = {
            **props.labels,
            "app.kubernetes.io/part-of": "kubetrain",
            POOL_LABEL: props.name,
        }
        self.tuner_name = f"{props.name}-node-tuner"
        self.cluster_role_name = f"kubetrain-{props.name}-node-tuner"
        self.preflight_name = f"{props.name}-preflight"
        if props.create_namespace:
            self._claim("Namespace", props.namespace, "create_namespace=False")
            api_object(self, "Namespace", self._namespace())
        self._claim("PriorityClass", self.priority_class_name, "a different pool name")
        api_object(self, "PriorityClass", self._priority_class())
        if props.runtime_class:
            self._claim("RuntimeClass", RUNTIME_CLASS_NAME, "runtime_class=False")
            api_object(
                self,
                "RuntimeClass",
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": {"name": RUNTIME_CLASS_NAME, "labels": dict(self.labels)},
                    "handler": RUNTIME_CLASS_NAME,
                },
            )
        self._rbac()
        self._node_patch_policy()
        api_object(self, "Resource", self._daemon_set())
        self.preflight: dict[str, Any] | None = None
        if props.preflight_nodes:
            self.preflight = self._preflight()
            api_object(self, "Preflight", self.preflight)

    # --- what jobs bind to -----------------------------------------------------------

    @property
    def profile(self) -> NcclProfile:
        return self.props.profile

    @property
    def gpus_per_node(self) -> int:
        return self.props.gpus_per_node

    @property
    def topology_key(self) -> str:
        return self.props.topology_key

    @property
    def priority_class_name(self) -> str:
        return f"kubetrain-{self.props.name}-training"

    @property
    def runtime_class_name(self) -> str | None:
        return RUNTIME_CLASS_NAME if self.props.runtime_class else None

    @property
    def node_selector(self) -> dict[str, str]:
        """Labels the pool's nodes carry (the node tuner's ok label when
        ``require_tuned_nodes``)."""
        selector = {**self._base_selector()}
        if self.props.require_tuned_nodes:
            selector[TUNING_LABEL] = TUNING_OK
        return dict(sorted(selector.items()))

    @property
    def tolerations(self) -> list[dict[str, Any]]:
        """``nvidia.com/gpu:NoSchedule``, the pool's taints and the profile's."""
        out: list[dict[str, Any]] = [dict(GPU_TOLERATION)]
        for item in [t.toleration() for t in self.props.taints] + [
            dict(t) for t in self.profile.tolerations
        ]:
            if item not in out:
                out.append(item)
        return out

    def bind(self, template: dict[str, Any], *, gpus_per_node: int | None = None) -> dict[str, Any]:
        """A patched copy of a PodTemplateSpec dict: the pool's node selector,
        tolerations, priority class and runtime class (GPU pods only), then the
        profile's :meth:`~NcclProfile.apply`. ``gpus_per_node`` defaults to the pool's;
        0 binds a pod without GPUs (an MPI launcher). A priority or runtime class the
        template sets is kept; a node selector value that contradicts the pool's is an
        error."""
        gpus = self.gpus_per_node if gpus_per_node is None else gpus_per_node
        if not 0 <= gpus <= self.gpus_per_node:
            raise ValueError(
                f"gpus_per_node ({gpus}) must be from 0 to the pool's {self.gpus_per_node}"
            )
        out = copy.deepcopy(template)
        spec = out.setdefault("spec", {})
        selector = spec.setdefault("nodeSelector", {})
        for key, value in self.node_selector.items():
            if selector.setdefault(key, value) != value:
                raise ValueError(
                    f"template nodeSelector[{key!r}] ({selector[key]!r}) contradicts node "
                    f"pool {self.props.name!r}, which needs {value!r}"
                )
        tolerations = spec.setdefault("tolerations", [])
        for toleration in self.tolerations:
            if toleration not in tolerations:
                tolerations.append(toleration)
        spec.setdefault("priorityClassName", self.priority_class_name)
        if gpus and self.runtime_class_name is not None:
            spec.setdefault("runtimeClassName", self.runtime_class_name)
        return self.profile.apply(out, gpus_per_node=gpus)

    # --- objects -----------------------------------------------------------------------

    def _base_selector(self) -> dict[str, str]:
        selector = dict(self.profile.node_selector)
        if self.props.gpu_product is not None:
            selector[GPU_PRODUCT_LABEL] = self.props.gpu_product
        selector.update(self.props.node_labels)
        return selector

    def _claim(self, kind: str, name: str, fix: str) -> None:
        """Refuse a second object of the same kind and name anywhere in the app."""
        for node in self.node.root.node.find_all():
            if isinstance(node, cdk8s.ApiObject) and node.kind == kind and node.name == name:
                raise ValueError(
                    f"{kind} {name!r} of node pool {self.props.name!r} is already emitted "
                    f"by {node.node.path}: use {fix}"
                )

    def _meta(self, name: str, *, namespaced: bool = True) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": dict(self.labels)}
        if namespaced:
            meta["namespace"] = self.props.namespace
        return meta

    def _namespace(self) -> dict[str, Any]:
        meta = self._meta(self.props.namespace, namespaced=False)
        for mode in ("enforce", "audit", "warn"):
            meta["labels"][f"pod-security.kubernetes.io/{mode}"] = "privileged"
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}

    def _priority_class(self) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": self._meta(self.priority_class_name, namespaced=False),
            "value": self.props.priority_value,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority" if self.props.preempting else "Never",
            "description": f"Training jobs on GPU node pool {self.props.name}.",
        }

    @property
    def tuner_user(self) -> str:
        """The user name of the tuner's ServiceAccount tokens."""
        return f"system:serviceaccount:{self.props.namespace}:{self.tuner_name}"

    def _node_patch_policy(self) -> None:
        """What RBAC cannot say: the tuner may patch only the node its pod runs on (the
        node name bound into its token), and only ``kubetrain.dev/`` labels and
        annotations; taints, spec and every other key stay as they are."""
        keep = "k.startsWith('kubetrain.dev/')"
        unchanged_except_ours = (
            "variables.new{0}.all(k, {1} || (k in variables.old{0} && "
            "variables.old{0}[k] == variables.new{0}[k])) && "
            "variables.old{0}.all(k, {1} || k in variables.new{0})"
        )
        policy = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": self._meta(self.cluster_role_name, namespaced=False),
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
                        "message": "the node tuner may change only kubetrain.dev/ labels",
                    },
                    {
                        "expression": unchanged_except_ours.format("Annotations", keep),
                        "reason": "Forbidden",
                        "message": "the node tuner may change only kubetrain.dev/ annotations",
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
            "metadata": self._meta(self.cluster_role_name, namespaced=False),
            "spec": {"policyName": self.cluster_role_name, "validationActions": ["Deny"]},
        }
        api_object(self, "NodePatchPolicyBinding", binding)

    def _rbac(self) -> None:
        api_object(
            self,
            "ServiceAccount",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self._meta(self.tuner_name)},
        )
        api_object(
            self,
            "ClusterRole",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": self._meta(self.cluster_role_name, namespaced=False),
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
            },
        )
        api_object(
            self,
            "ClusterRoleBinding",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": self._meta(self.cluster_role_name, namespaced=False),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": self.cluster_role_name,
                },
                "subjects": [
                    {
                        "kind": "ServiceAccount",
                        "name": self.tuner_name,
                        "namespace": self.props.namespace,
                    }
                ],
            },
        )

    def tuner_args(self, phase: str = "check") -> list[str]:
        """The node tuner's command-line arguments for one phase (``apply`` or ``check``)."""
        args = [f"--phase={phase}", "--host-root=/host", "--proc-root=/proc"]
        if phase == "check":
            args.append(f"--interval={self.props.tuner_interval_s}")
        args += [f"--sysctl={k}={v}" for k, v in sorted(self.props.sysctls.items())]
        if phase == "check" and self.profile.requires_peermem:
            args.append("--require-peermem")
        return args

    def _tuner_container(self, name: str, phase: str) -> dict[str, Any]:
        return {
            "name": name,
            "image": str(self.props.tuner_image),
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
            "app.kubernetes.io/instance": self.props.name,
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
            "serviceAccountName": self.tuner_name,
            # Host network: net.* sysctls are per network namespace.
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "nodeSelector": self._base_selector(),
            "tolerations": self.tolerations,
            "initContainers": [apply_step],
            "containers": [checker],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}],
            "terminationGracePeriodSeconds": 5,
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": self._meta(self.tuner_name),
            "spec": {
                "selector": {"matchLabels": selector},
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "10%"},
                },
                "template": {
                    "metadata": {
                        "labels": {**self.labels, **selector},
                        "annotations": {"sidecar.istio.io/inject": "false"},
                    },
                    "spec": pod_spec,
                },
            },
        }

    # --- preflight ---------------------------------------------------------------------

    def preflight_script(self) -> str:
        """The launcher's shell script: mpirun all_reduce_perf, then judge the output.
        Its last line starts with ``kubetrain-preflight: PASS`` or ``... FAIL``."""
        props = self.props
        gpus = self.gpus_per_node
        ranks = props.preflight_nodes * gpus
        mpirun = [
            "mpirun",
            "--allow-run-as-root",
            "-np",
            str(ranks),
            "-bind-to",
            "none",
            "-map-by",
            "slot",
        ]
        if self.profile.host_network:
            rsh_args = f"-p {PREFLIGHT_SSH_PORT} -o ConnectionAttempts=10"
            mpirun += ["--mca", "plm_rsh_args", rsh_args]
        # Ranks started over ssh do not inherit the pod's environment: export it.
        mpirun += ["-x", "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,NET"]
        exported = [k for k in self.profile.env if k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS")]
        for name in sorted({*exported, "PATH", "LD_LIBRARY_PATH"}):
            mpirun += ["-x", name]
        mpirun += ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
        shape = f"{props.preflight_nodes} nodes x {gpus} GPUs"
        lines = [
            f'echo "{PREFLIGHT_MARK} all_reduce_perf over {shape}, profile {self.profile.name}"',
            f"{{ {shlex.join(mpirun)}; echo $? > /tmp/mpirun.rc; }} 2>&1 | tee /tmp/preflight.log",
            "rc=$(cat /tmp/mpirun.rc)",
            'if [ "$rc" -ne 0 ]; then',
            f'  echo "{PREFLIGHT_MARK} FAIL mpirun exited with status $rc"; exit 1',
            "fi",
            "busbw=$(awk '/Avg bus bandwidth/ {print $NF}' /tmp/preflight.log | tail -n 1)",
            'if [ -z "$busbw" ]; then',
            f"  echo \"{PREFLIGHT_MARK} FAIL no 'Avg bus bandwidth' in the output\"; exit 1",
            "fi",
            "sed -n 's/.*NCCL INFO Using network //p' /tmp/preflight.log | sort -u > /tmp/nets",
            "nets=$(tr '\\n' ' ' < /tmp/nets)",
        ]
        expected = self.profile.expected_network
        if expected is not None:
            lines += [
                f"if [ ! -s /tmp/nets ] || grep -qvF '{expected}' /tmp/nets; then",
                f'  echo "{PREFLIGHT_MARK} FAIL NCCL used network(s) [$nets], expected'
                f" {expected}: the fabric is not in use (RDMA device, memlock, HCA or"
                ' interface settings)"; exit 1',
                "fi",
            ]
        minimum = props.preflight_min_busbw_gbps
        if minimum is not None:
            lines += [
                f"if ! awk -v b=\"$busbw\" -v m={minimum:g} 'BEGIN {{ exit !(b + 0 >= m) }}'; then",
                f'  echo "{PREFLIGHT_MARK} FAIL average bus bandwidth $busbw GB/s is below'
                f' {minimum:g} GB/s"; exit 1',
                "fi",
            ]
        lines.append(
            f'echo "{PREFLIGHT_MARK} PASS average bus bandwidth $busbw GB/s over {shape},'
            ' network(s) [$nets]"'
        )
        return "\n".join(lines) + "\n"

    def _preflight(self) -> dict[str, Any]:
        props = self.props
        assert props.preflight_image is not None
        image = str(props.preflight_image)
        sshd = ["/usr/sbin/sshd", "-De"]
        if self.profile.host_network:
            sshd += ["-p", str(PREFLIGHT_SSH_PORT)]
        labels = {**self.labels, "app.kubernetes.io/name": "nccl-preflight"}
        worker = self.bind(
            {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    # nccl-tests talk to no API: no token in the pods.
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "worker",
                            "image": image,
                            "command": sshd,
                            "resources": {
                                "requests": {"cpu": "4", "memory": "32Gi"},
                                "limits": {"memory": "32Gi"},
                            },
                        }
                    ],
                },
            }
        )
        worker["spec"]["affinity"] = {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchLabels": {
                                    "training.kubeflow.org/job-name": self.preflight_name
                                }
                            },
                            "topologyKey": self.topology_key,
                        },
                    }
                ]
            }
        }
        launcher = self.bind(
            {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "launcher",
                            "image": image,
                            "command": ["/bin/sh", "-c", self.preflight_script()],
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "512Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                        }
                    ],
                },
            },
            gpus_per_node=0,
        )
        job = {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": self._meta(self.preflight_name),
            "spec": {
                "slotsPerWorker": self.gpus_per_node,
                "runPolicy": {
                    "cleanPodPolicy": "Running",
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": props.preflight_deadline_s,
                },
                "sshAuthMountPath": "/root/.ssh",
                "mpiImplementation": "OpenMPI",
                "launcherCreationPolicy": "WaitForWorkersReady",
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": launcher},
                    "Worker": {
                        "replicas": props.preflight_nodes,
                        "restartPolicy": "Never",
                        "template": worker,
                    },
                },
            },
        }
        try:
            load_job(job, source=self.node.path)
        except JobValidationError as exc:
            raise ValueError(
                f"preflight MPIJob of node pool {props.name!r} is invalid: {exc}"
            ) from None
        return job
