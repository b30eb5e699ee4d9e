"""The fake node topology of the local control plane (cluster/topology.py)."""

from __future__ import annotations

import ipaddress

import pytest

from cluster.topology import (
    DEFAULT_TOPOLOGY_LABEL,
    GPU_RESOURCE,
    KWOK_NODE_ANNOTATION,
    POOL_LABEL,
    RESOURCE_METRICS_PATH_ANNOTATION,
    GpuSpec,
    NodePool,
    Taint,
    Topology,
    default_topology,
)


def test_default_topology_has_two_cpu_and_four_gpu_nodes() -> None:
    nodes = default_topology().nodes()
    names = [node["metadata"]["name"] for node in nodes]
    assert names == [
        "kwok-cpu-0",
        "kwok-cpu-1",
        "kwok-gpu-0",
        "kwok-gpu-1",
        "kwok-gpu-2",
        "kwok-gpu-3",
    ]
    for node in nodes:
        assert node["metadata"]["annotations"][KWOK_NODE_ANNOTATION] == "fake"


def test_gpu_nodes_carry_capacity_gfd_labels_taint_and_blocks() -> None:
    gpu_nodes = [
        n for n in default_topology().nodes() if n["metadata"]["labels"][POOL_LABEL] == "gpu"
    ]
    for node in gpu_nodes:
        labels = node["metadata"]["labels"]
        assert node["status"]["capacity"][GPU_RESOURCE] == "8"
        assert node["status"]["allocatable"][GPU_RESOURCE] == "8"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["nvidia.com/gpu.count"] == "8"
        assert labels["nvidia.com/gpu.present"] == "true"
        assert node["spec"]["taints"] == [{"key": GPU_RESOURCE, "effect": "NoSchedule"}]
    blocks = [n["metadata"]["labels"][DEFAULT_TOPOLOGY_LABEL] for n in gpu_nodes]
    assert blocks == ["block-0", "block-0", "block-1", "block-1"]


def test_cpu_nodes_have_no_gpus_and_no_taints() -> None:
    cpu_nodes = [
        n for n in default_topology().nodes() if n["metadata"]["labels"][POOL_LABEL] == "cpu"
    ]
    assert len(cpu_nodes) == 2
    for node in cpu_nodes:
        assert GPU_RESOURCE not in node["status"]["capacity"]
        assert "taints" not in node["spec"]
        assert not any(key.startswith("nvidia.com/") for key in node["metadata"]["labels"])


def test_every_node_gets_its_own_pod_cidr_and_address() -> None:
    nodes = default_topology(cpu_nodes=3, gpu_nodes=5).nodes()
    cidrs = [ipaddress.ip_network(n["spec"]["podCIDR"]) for n in nodes]
    assert len(set(cidrs)) == len(nodes)
    assert all(not a.overlaps(b) for i, a in enumerate(cidrs) for b in cidrs[i + 1 :])
    addresses = [n["status"]["addresses"][0]["address"] for n in nodes]
    assert len(set(addresses)) == len(nodes)


def test_nodes_serving_metrics_name_their_path_at_kwoks_address() -> None:
    plain = default_topology(cpu_nodes=1, gpu_nodes=1).nodes()
    served = default_topology(cpu_nodes=1, gpu_nodes=1).nodes(metrics_address="127.0.0.1")
    for before, after in zip(plain, served, strict=True):
        name = after["metadata"]["name"]
        annotations = after["metadata"]["annotations"]
        assert annotations[RESOURCE_METRICS_PATH_ANNOTATION] == (
            f"/metrics/nodes/{name}/metrics/resource"
        )
        assert after["status"]["addresses"] == [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": name},
        ]
        # Nothing else changes, and a cluster without metrics keeps its own addresses.
        del annotations[RESOURCE_METRICS_PATH_ANNOTATION]
        assert after["metadata"] == before["metadata"]
        assert after["spec"] == before["spec"]
        assert RESOURCE_METRICS_PATH_ANNOTATION not in before["metadata"]["annotations"]
        assert before["status"]["addresses"][0]["address"].startswith("10.240.")


def test_topology_is_configurable() -> None:
    topology = default_topology(
        cpu_nodes=1, gpu_nodes=6, gpus_per_node=4, nodes_per_block=3, topology_label="x/block"
    )
    gpu_nodes = [n for n in topology.nodes() if n["metadata"]["labels"][POOL_LABEL] == "gpu"]
    assert topology.node_count == 7
    assert {n["status"]["capacity"][GPU_RESOURCE] for n in gpu_nodes} == {"4"}
    assert [n["metadata"]["labels"]["x/block"] for n in gpu_nodes] == [
        "block-0",
        "block-0",
        "block-0",
        "block-1",
        "block-1",
        "block-1",
    ]


def test_rejects_duplicate_pool_names() -> None:
    with pytest.raises(ValueError, match="unique, repeated: cpu"):
        Topology(pools=(NodePool(name="cpu", count=1), NodePool(name="cpu", count=2)))


def test_rejects_bad_pool_name() -> None:
    with pytest.raises(ValueError, match="'GPU_Pool' must be lower-case"):
        NodePool(name="GPU_Pool", count=1)


def test_rejects_negative_node_count() -> None:
    with pytest.raises(ValueError, match="count -1: expected 0 or more"):
        NodePool(name="gpu", count=-1)


def test_rejects_zero_gpus_per_node() -> None:
    with pytest.raises(ValueError, match="GPU count per node is 0"):
        GpuSpec(count=0)


def test_rejects_unknown_taint_effect() -> None:
    with pytest.raises(ValueError, match="effect 'NoRun': expected one of NoSchedule"):
        Taint(key="example.com/x", effect="NoRun")


def test_rejects_more_nodes_than_the_pod_network_holds() -> None:
    with pytest.raises(ValueError, match="1025 nodes requested: at most 1024"):
        Topology(pools=(NodePool(name="cpu", count=1025),))
