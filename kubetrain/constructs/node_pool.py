"""``GpuNodePool``: what a pool of GPU nodes needs for NCCL training, and how jobs bind
to it.

The construct emits its namespace with default-deny NetworkPolicies
(:class:`~kubetrain.constructs.network_policy.TrainingNetworkPolicy`), a PriorityClass for
training, optionally the ``nvidia`` RuntimeClass, the node tuner
(:class:`~kubetrain.constructs.node_tuning.NodeTuner`) limited to the pool's nodes, and a
preflight nccl-tests MPIJob
(:class:`~kubetrain.constructs.preflight.NcclPreflight`) across ``preflight_nodes`` nodes
with the pool's NCCL profile applied. Job constructs bind their pod templates with
:meth:`GpuNodePool.bind`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cdk8s
import constructs

from kubetrain.api import keys as K
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.network_policy import (
    TrainingNetwork,
    TrainingNetworkPolicy,
    TrainingNetworkPolicyProps,
)
from kubetrain.constructs.node_tuning import TUNER_APP, NodeTuner, NodeTunerProps
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.preflight import NcclPreflight, NcclPreflightProps
from kubetrain.constructs.types import Image, check_dns_label, check_labels
from kubetrain.controller.config import NodeRules
from kubetrain.node_tuner import parse_sysctl

GPU_PRODUCT_LABEL = K.GPU_PRODUCT_LABEL
POOL_LABEL = K.GPU_POOL_LABEL
DEFAULT_TOPOLOGY_KEY = K.BLOCK_TOPOLOGY_LABEL
GPU_TOLERATION = {"key": K.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
RUNTIME_CLASS_NAME = "nvidia"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
DEFAULT_SYSCTLS: Mapping[str, str] = {
    "net.core.rmem_max": "67108864",
    "net.core.wmem_max": "67108864",
}
"""Socket buffer ceilings the tuner raises by default (64 MiB)."""
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
    """Emit the namespace, labelled Pod Security ``privileged`` (the tuner's host mounts
    and RDMA pods), with ``network_policy``. False when it exists or another pool
    creates it."""
    network_policy: TrainingNetwork | None = field(default_factory=TrainingNetwork)
    """NetworkPolicies emitted with the namespace: deny all, then allow traffic between
    its pods (every port), DNS to kube-dns, the node tuners to the API server, and
    ``TrainingNetwork.egress`` (e.g. the object store of the datasets). Default: that,
    with no further egress. None: no policy (every connection allowed). Only with
    ``create_namespace``: a namespace made elsewhere keeps its owner's policies."""
    sysctls: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SYSCTLS))
    """Sysctls the tuner applies on every node, each through a hostPath of its own
    ``/proc/sys`` file (it must exist there), on the host network only for ``net.*``.
    Default: ``net.core.rmem_max`` and ``net.core.wmem_max`` = 64 MiB."""
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
    unhealthy_conditions: tuple[str, ...] = K.DEFAULT_UNHEALTHY_NODE_CONDITIONS
    """Node conditions that, True, mark one of the pool's nodes unhealthy for training:
    the operator moves the jobs on it at once (a stack's operator watches every pool's).
    Default: node-problem-detector's KernelDeadlock and ReadonlyFilesystem, NVIDIA
    NVSentinel's SysLogsXIDError, SysLogsSXIDError and SysLogsGPUFallenOff."""
    unhealthy_taints: tuple[str, ...] = ()
    """Taint keys that mark one of the pool's nodes unhealthy (e.g. the taint the GPU
    health system puts on a quarantined node). Default: none."""

    def __post_init__(self) -> None:
        check_dns_label("name", self.name)
        NodeRules(conditions=self.unhealthy_conditions, taints=self.unhealthy_taints)
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
        if not self.create_namespace and self.network_policy not in (None, TrainingNetwork()):
            raise ValueError(
                f"network_policy ({self.network_policy!r}) is emitted with the namespace, "
                f"but create_namespace is False: set it on the pool that creates "
                f"{self.namespace!r}, or add a TrainingNetworkPolicy for it"
            )
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

    Child ids: ``Namespace`` and ``NetworkPolicy`` (with ``create_namespace``; the latter
    also with ``network_policy``), ``PriorityClass``,
    ``RuntimeClass`` (with ``runtime_class``), ``Tuner`` (the node tuner) and ``Preflight``
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
            if props.network_policy is not None:
                TrainingNetworkPolicy(
                    self,
                    "NetworkPolicy",
                    TrainingNetworkPolicyProps(
                        namespace=props.namespace,
                        network=props.network_policy,
                        api_clients={"app.kubernetes.io/name": TUNER_APP},
                        labels=self.labels,
                    ),
                )
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
        self.tuner = NodeTuner(
            self,
            "Tuner",
            NodeTunerProps(
                pool=props.name,
                name=self.tuner_name,
                cluster_role_name=self.cluster_role_name,
                namespace=props.namespace,
                image=props.tuner_image,
                node_selector=self._base_selector(),
                tolerations=tuple(self.tolerations),
                sysctls=props.sysctls,
                interval_s=props.tuner_interval_s,
                require_peermem=self.profile.requires_peermem,
                labels=self.labels,
            ),
        )
        self.preflight: dict[str, Any] | None = None
        if props.preflight_nodes:
            assert props.preflight_image is not None
            preflight = NcclPreflight(
                self,
                "Preflight",
                NcclPreflightProps(
                    pool=self,
                    name=self.preflight_name,
                    namespace=props.namespace,
                    image=props.preflight_image,
                    nodes=props.preflight_nodes,
                    deadline_s=props.preflight_deadline_s,
                    min_busbw_gbps=props.preflight_min_busbw_gbps,
                    labels=self.labels,
                ),
            )
            self.preflight = preflight.manifest
            self.preflight_script = preflight.script

    @property
    def tuner_user(self) -> str:
        """The user name of the tuner's ServiceAccount tokens."""
        return self.tuner.tuner_user

    def tuner_args(self, phase: str = "check") -> list[str]:
        """The node tuner's command-line arguments for one phase (``apply`` or ``check``)."""
        return self.tuner.tuner_args(phase)

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
            selector[K.NODE_TUNING_LABEL] = K.NODE_TUNING_OK
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
