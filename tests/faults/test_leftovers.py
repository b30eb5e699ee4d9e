"""Tests that start and stop control planes of their own, a real node's among them, and
kill their processes as a crash would: a dead session's leftovers are cleaned up without
touching anyone else's, a node's ``down`` leaves nothing on the host, and a killed node's
namespace, veth, cgroups and mounts give way to the next node (which finds the images
the killed one imported: ``cluster/node_store.py``).

They run in a process of their own, before or after the profiles' control planes and
never beside the real node's (``tests/tiers.py``): each starts up to two control planes,
and a real node uses the machine's one image store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cluster import host
from cluster.local import LocalCluster, stop_orphaned_clusters
from cluster.node import NodeError, RealNode
from cluster.node_config import NodeNetwork
from cluster.oci import busybox_files
from cluster.tools import find_tools
from cluster.topology import default_topology
from tests.integration.kube import wait_for

BUSYBOX = "localhost/kubetrain/busybox:test"


def test_stopping_a_dead_sessions_cluster_kills_only_its_own_processes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A session killed mid-run leaves its cluster's pid files; an hour later one of
    those pids belongs to another process (in CI: the Kueue control plane's etcd, which
    the next session's cleanup then SIGKILLed through kwokctl). Cleanup and ``down``
    must stop the dead cluster's own leftovers and nothing else."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("control-plane-dead"), tools=find_tools(only=("control-plane",))
    )
    cluster.up()
    stranger: subprocess.Popen[bytes] | None = None
    try:
        survivor = cluster.pids()["kube-apiserver"]
        # The session dies: its owner is gone and every component but the API server
        # with it (nothing stopped them cleanly; their pid files stay).
        owner = subprocess.Popen(["true"])
        owner.wait()
        cluster.owner_file.write_text(f"{owner.pid}\n", encoding="utf-8")
        for name, pid in cluster.pids().items():
            if name != "kube-apiserver":
                os.kill(pid, signal.SIGKILL)
        wait_for(cluster.pids, lambda p: set(p) == {"kube-apiserver"}, what="the rest gone")
        # etcd's pid is reused by an unrelated process.
        stranger = subprocess.Popen(["sleep", "300"])
        (cluster.cluster_dir / "pids" / "etcd.pid").write_text(f"{stranger.pid}")
        assert cluster.pids() == {"kube-apiserver": survivor}
        assert cluster.is_orphaned()
        assert stop_orphaned_clusters([cluster.workdir]) == [cluster.workdir]
        assert stranger.poll() is None, "the stranger holding etcd's old pid was killed"
        wait_for(
            lambda: _cmdline(survivor), lambda c: not c, what="the dead session's API server gone"
        )
        assert not cluster.cluster_dir.exists()
    finally:
        if stranger is not None:
            stranger.kill()
            stranger.wait()
        cluster.down()


def _cmdline(pid: int) -> bytes:
    """What process ``pid`` runs (empty once it has exited, a zombie included)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def run_sleeper(cluster: LocalCluster, node: RealNode) -> None:
    """Run pod ``left`` (a busybox ``sleep``) on the real node of ``cluster``."""
    node.import_files(BUSYBOX, busybox_files(), entrypoint=["/bin/sh"])
    cluster.kubectl(
        "run",
        "left",
        f"--image={BUSYBOX}",
        "--image-pull-policy=Never",
        "--restart=Never",
        "--command",
        "--",
        "sleep",
        "3600",
    )
    wait_for(
        lambda: cluster.kubectl("get", "pod", "left", "-o", "jsonpath={.status.phase}").stdout,
        lambda phase: phase == "Running",
        what="pod left Running",
        timeout=60,
    )


def assert_no_network_or_cgroups(node: RealNode) -> None:
    assert not (host.NETNS_DIR / node.netns).exists()
    assert host.run(["ip", "link", "show", node.veth], check=False) == ""
    assert [
        h / node.cgroup_root for h in host.cgroup_hierarchies() if (h / node.cgroup_root).exists()
    ] == []


def test_down_leaves_nothing_behind(tmp_path_factory: pytest.TempPathFactory) -> None:
    # A cluster of its own, on addresses of its own (the session's real node may run).
    network = NodeNetwork(host_ip="10.201.1.1", node_ip="10.201.1.2", pod_subnet="10.202.1.0/24")
    cluster = LocalCluster(
        tmp_path_factory.mktemp("control-plane-node-down"),
        real_node=True,
        node_network=network,
        topology=default_topology(cpu_nodes=0, gpu_nodes=1),
    )
    sysctls_before = host.read_sysctls(host.KUBELET_SYSCTLS)
    try:
        cluster.up()
        node = cluster.real_node
        assert node is not None and node.is_running()
        run_sleeper(cluster, node)
        recorded = json.loads(node.host_state_file.read_text())
        pids = list(node.pids().values()) + host.processes_with_arg(str(node.containerd_socket))
        pids += sorted(host.cgroup_pids(node.cgroup_root))
        assert len(pids) >= 8, pids  # 6 daemons, a shim, pause and sleep
    finally:
        cluster.down()
    deadline = time.monotonic() + 10
    while (alive := [p for p in pids if host.rss_bytes(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive == [], f"processes left running: {alive}"
    assert_no_network_or_cgroups(node)
    assert host.mounts_under(cluster.workdir) == []
    assert host.read_sysctls(host.KUBELET_SYSCTLS) == sysctls_before
    for path in host.FIXED_PATHS:
        if str(path) not in recorded["existing"]:
            assert not path.exists(), f"{path} was created by the node and left behind"
    assert sorted(p.name for p in node.root.iterdir()) == ["logs"]
    # The images stay in the store for the next node; the claim went with this one.
    assert not node.store.holds(node.root) and node.store.root.is_dir()


def test_a_killed_nodes_leftovers_give_way_to_the_next(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A session killed before its teardown (say a CI job cancelled) leaves the node's
    # namespace, veth, cgroups and mounts behind with no process: the next cluster on
    # those addresses removes them and starts; a node that still runs keeps them.
    network = NodeNetwork(host_ip="10.201.2.1", node_ip="10.201.2.2", pod_subnet="10.202.2.0/24")
    topology = default_topology(cpu_nodes=0, gpu_nodes=1)
    killed, after = (
        LocalCluster(
            tmp_path_factory.mktemp(f"control-plane-node-{role}"),
            real_node=True,
            node_network=network,
            topology=topology,
        )
        for role in ("killed", "after")
    )
    try:
        killed.up()
        node = killed.real_node
        assert node is not None
        assert node.store.holds(node.root), f"another node holds {node.store.path}"
        run_sleeper(killed, node)
        with pytest.raises(NodeError, match=f"the real node of namespace {node.netns} runs"):
            RealNode(after.workdir, tools=after.tools, network=network).up(
                api_port=1, pki_dir=after.workdir, kubectl=after.tools.kubectl, deadline=0
            )
        pids = list(killed.pids().values()) + host.processes_with_arg(str(node.containerd_socket))
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        host.kill_cgroup(node.cgroup_root)
        assert (host.NETNS_DIR / node.netns).exists()
        assert host.mounts_under(node.root) != []
        after.up()
        assert after.real_node is not None and after.real_node.is_running()
        # The killed node never released the store: the next one takes it over, with the
        # image the killed one imported.
        assert after.real_node.store.holds(after.real_node.root)
        assert BUSYBOX in after.real_node.images.ids()
        assert_no_network_or_cgroups(node)
        assert host.mounts_under(node.root) == []
        assert sorted(p.name for p in node.root.iterdir()) == ["logs"]
    finally:
        after.down()
        killed.down()
