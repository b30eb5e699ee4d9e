"""The fake nodes of the local control plane: CPU nodes and GPU nodes shaped like a
GPU cluster (capacity ``nvidia.com/gpu``, GPU Feature Discovery labels, the GPU taint,
a topology block label), created as Node objects that kwok then keeps alive.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Annotation that marks a node as one kwok manages (kwok's own convention).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Label naming the node pool a fake node belongs to.
POOL_LABEL = "kubetrain.dev/node-pool"
#: Default label grouping GPU nodes into blocks that share a fast fabric segment.
DEFAULT_TOPOLOGY_LABEL = "topology.kubetrain.dev/block"
#: Extended resource name of NVIDIA GPUs, as the device plugin advertises it.
GPU_RESOURCE = "nvidia.com/gpu"
#: Pods get addresses from per-node /24s carved out of this range: 1,024 nodes (the
#: 1,000-job benchmark runs 500), the first 256 in 10.244.0.0/16 as before.
POD_NETWORK = ipaddress.IPv4Network("10.244.0.0/14")
#: Node InternalIPs are taken from this range (they are labels only: nothing listens),
#: unless the cluster serves metrics (``Topology.nodes``: kwok's address instead).
NODE_NETWORK = ipaddress.IPv4Network("10.240.0.0/16")
#: The node annotation metrics-server (>= 0.7) reads as the path of a node's resource
#: metrics, and the path kwok serves them at (its ``Metric`` ``metrics-resource``).
RESOURCE_METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
RESOURCE_METRICS_PATH = "/metrics/nodes/{node}/metrics/resource"


@dataclass(frozen=True, kw_only=True)
class Taint:
    """A node taint."""

    key: str
    effect: str
    value: str | None = None

    def __post_init__(self) -> None:
        effects = ("NoSchedule", "PreferNoSchedule", "NoExecute")
        if self.effect not in effects:
            raise ValueError(
                f"taint {self.key} has effect {self.effect!r}: expected one of {', '.join(effects)}"
            )

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value is not None:
            out["value"] = self.value
        return out


#: The taint GPU node pools carry so that only pods tolerating it land there.
GPU_TAINT = Taint(key=GPU_RESOURCE, effect="NoSchedule")


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """The GPUs of every node in a pool, as GPU Feature Discovery would label them."""

    count: int = 8
    product: str = "NVIDIA-H100-80GB-HBM3"
    memory_mib: int = 81559
    family: str = "hopper"
    #: Nodes per topology block; node i of the pool is in block ``i // nodes_per_block``.
    nodes_per_block: int = 2

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"GPU count per node is {self.count}: expected at least 1")
        if self.nodes_per_block < 1:
            raise ValueError(
                f"nodes_per_block is {self.nodes_per_block}: expected at least 1 node per block"
            )


@dataclass(frozen=True, kw_only=True)
class NodePool:
    """A group of identical fake nodes named ``kwok-<name>-<i>``.

    cpu, memory and pods are the allocatable capacity of each node; ``gpus`` (default
    none) makes it a GPU pool: GPU capacity, GFD labels, the GPU taint and a block label.
    """

    name: str
    count: int
    cpu: str = "32"
    memory: str = "128Gi"
    pods: int = 110
    instance_type: str = "kwok-cpu"
    gpus: GpuSpec | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: Other capacity each node has, e.g. ``{"rdma/ib": "8"}`` (fabric devices, hugepages).
    extended: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").isalnum() or not self.name.islower():
            raise ValueError(
                f"node pool name {self.name!r} must be lower-case letters, digits and '-'"
            )
        if self.count < 0:
            raise ValueError(f"node pool {self.name} has count {self.count}: expected 0 or more")

    def node_name(self, index: int) -> str:
        return f"kwok-{self.name}-{index}"


def cpu_pool(count: int = 2) -> NodePool:
    """General-purpose nodes for the operator, launchers and CPU replicas."""
    return NodePool(name="cpu", count=count, instance_type="kwok-cpu-32")


def gpu_pool(count: int = 4, gpus: GpuSpec | None = None) -> NodePool:
    """GPU nodes: ``gpus.count`` GPUs each, tainted ``nvidia.com/gpu:NoSchedule``."""
    gpus = gpus or GpuSpec()
    return NodePool(
        name="gpu",
        count=count,
        cpu="192",
        memory="2048Gi",
        instance_type=f"kwok-gpu-{gpus.count}x-{gpus.product.lower()}",
        gpus=gpus,
        taints=(GPU_TAINT,),
    )


@dataclass(frozen=True, kw_only=True)
class Topology:
    """Every node pool of the local cluster."""

    pools: tuple[NodePool, ...]
    topology_label: str = DEFAULT_TOPOLOGY_LABEL

    def __post_init__(self) -> None:
        names = [pool.name for pool in self.pools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"node pool names must be unique, repeated: {', '.join(duplicates)}")
        total = sum(pool.count for pool in self.pools)
        if total > POD_NETWORK.num_addresses // 256:
            raise ValueError(
                f"{total} nodes requested: at most {POD_NETWORK.num_addresses // 256} fit the "
                f"pod network {POD_NETWORK}"
            )

    @property
    def node_count(self) -> int:
        return sum(pool.count for pool in self.pools)

    def node_names(self) -> list[str]:
        return [pool.node_name(i) for pool in self.pools for i in range(pool.count)]

    def nodes(
        self, *, kubelet_version: str = "kwok", first: int = 0, metrics_address: str | None = None
    ) -> list[dict[str, Any]]:
        """The Node objects to create, status included (kwok reports the conditions).

        ``kubelet_version`` is what the nodes report as their kubelet (kwok plays it);
        ``first`` is the ordinal of the first node (its pod CIDR and address), for nodes
        added beside a cluster's own (which start at 0). ``metrics_address`` (default:
        none) is where kwok serves the nodes' kubelet endpoints: it becomes their
        InternalIP, and each node names the path of its resource metrics there, for
        metrics-server to scrape (``cluster.metrics``).
        """
        nodes: list[dict[str, Any]] = []
        for pool in self.pools:
            for index in range(pool.count):
                ordinal = first + len(nodes)
                node = self._node(pool, index, ordinal=ordinal, kubelet=kubelet_version)
                if metrics_address is not None:
                    _serve_metrics_at(node, metrics_address)
                nodes.append(node)
        return nodes

    def _node(self, pool: NodePool, index: int, *, ordinal: int, kubelet: str) -> dict[str, Any]:
        name = pool.node_name(index)
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": pool.instance_type,
            "type": "kwok",
            POOL_LABEL: pool.name,
        }
        capacity: dict[str, str] = {
            "cpu": pool.cpu,
            "memory": pool.memory,
            "pods": str(pool.pods),
            "ephemeral-storage": "1Ti",
        }
        if pool.gpus is not None:
            gpus = pool.gpus
            labels.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": gpus.product,
                    "nvidia.com/gpu.count": str(gpus.count),
                    "nvidia.com/gpu.memory": str(gpus.memory_mib),
                    "nvidia.com/gpu.family": gpus.family,
                    self.topology_label: f"block-{index // gpus.nodes_per_block}",
                }
            )
            capacity[GPU_RESOURCE] = str(gpus.count)
        capacity.update(pool.extended)
        labels.update(pool.labels)
        pod_cidr = str(next(itertools.islice(POD_NETWORK.subnets(new_prefix=24), ordinal, None)))
        internal_ip = str(NODE_NETWORK.network_address + ordinal + 1)
        spec: dict[str, Any] = {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]}
        if pool.taints:
            spec["taints"] = [taint.to_dict() for taint in pool.taints]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    KWOK_NODE_ANNOTATION: "fake",
                    "node.alpha.kubernetes.io/ttl": "0",
                },
            },
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "addresses": [
                    {"type": "InternalIP", "address": internal_ip},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "osImage": "kwok fake node",
                    "kernelVersion": "",
                    "kubeletVersion": kubelet,
                    "kubeProxyVersion": "",
                    "containerRuntimeVersion": "kwok://",
                    "bootID": "",
                    "machineID": "",
                    "systemUUID": "",
                },
            },
        }


def _serve_metrics_at(node: dict[str, Any], address: str) -> None:
    # metrics-server scrapes https://<InternalIP>:<kubelet port><path>; kwok serves
    # every node's metrics on one port, each at a path of its own (kwok's convention).
    name = node["metadata"]["name"]
    node["metadata"]["annotations"][RESOURCE_METRICS_PATH_ANNOTATION] = (
        RESOURCE_METRICS_PATH.format(node=name)
    )
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": address} if a["type"] == "InternalIP" else a
        for a in node["status"]["addresses"]
    ]


def default_topology(
    *,
    cpu_nodes: int = 2,
    gpu_nodes: int = 4,
    gpus_per_node: int = 8,
    nodes_per_block: int = 2,
    topology_label: str = DEFAULT_TOPOLOGY_LABEL,
) -> Topology:
    """Two CPU nodes and four 8-GPU nodes in blocks of two, unless told otherwise."""
    return Topology(
        pools=(
            cpu_pool(cpu_nodes),
            gpu_pool(gpu_nodes, GpuSpec(count=gpus_per_node, nodes_per_block=nodes_per_block)),
        ),
        topology_label=topology_label,
    )
