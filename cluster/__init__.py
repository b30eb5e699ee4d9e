"""The local control plane for tests and the demo: a real kube-apiserver, etcd,
kube-controller-manager and kube-scheduler run as local processes, with kwok faking
the nodes and the pod lifecycle. See cluster/cluster.mk for the make targets."""

from cluster.fake_pods import (
    EXIT_CODE_ANNOTATION,
    MESSAGE_ANNOTATION,
    REASON_ANNOTATION,
    exit_annotations,
    exit_patch,
    make_pod_exit,
)
from cluster.local import ClusterError, LocalCluster
from cluster.tools import Tools, ToolsMissingError, Versions, find_tools
from cluster.topology import (
    DEFAULT_TOPOLOGY_LABEL,
    GPU_RESOURCE,
    GPU_TAINT,
    GpuSpec,
    NodePool,
    Taint,
    Topology,
    cpu_pool,
    default_topology,
    gpu_pool,
)

__all__ = [
    "DEFAULT_TOPOLOGY_LABEL",
    "EXIT_CODE_ANNOTATION",
    "GPU_RESOURCE",
    "GPU_TAINT",
    "MESSAGE_ANNOTATION",
    "REASON_ANNOTATION",
    "ClusterError",
    "GpuSpec",
    "LocalCluster",
    "NodePool",
    "Taint",
    "Tools",
    "ToolsMissingError",
    "Topology",
    "Versions",
    "cpu_pool",
    "default_topology",
    "exit_annotations",
    "exit_patch",
    "find_tools",
    "gpu_pool",
    "make_pod_exit",
]
