"""Which processes a cluster directory's pid files name: kwokctl writes a pid alone, and
pids are reused. These read the built control plane's binary paths (``find_tools``), so
they run in the tier that builds the tools, not the unit tier."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cluster.local import LocalCluster, stop_orphaned_clusters


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _session_left_behind(workdir: Path, component_pid: int) -> LocalCluster:
    """A cluster directory as a killed session leaves it: its owner gone, kwokctl's pid
    file of etcd still there, naming ``component_pid``."""
    cluster = LocalCluster(workdir)
    pids = cluster.cluster_dir / "pids"
    pids.mkdir(parents=True)
    (pids / "etcd.pid").write_text(f"{component_pid}", encoding="utf-8")
    cluster.owner_file.write_text(f"{_dead_pid()}\n", encoding="utf-8")
    return cluster


def test_a_stale_pid_file_does_not_claim_the_process_that_reused_its_pid(
    tmp_path: Path,
) -> None:
    """A killed session's etcd.pid names a pid that another process (another cluster's
    etcd, in CI) got later: the cluster is not orphaned, and stopping orphans leaves that
    process alone (kwokctl would SIGKILL whatever the file names)."""
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        cluster = _session_left_behind(tmp_path / "dead", stranger.pid)
        assert cluster.pids() == {}
        assert not cluster.is_running()
        assert not cluster.is_orphaned()
        assert stop_orphaned_clusters([cluster.workdir]) == []
        assert stranger.poll() is None, "a stranger's process was killed"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_component_running_the_clusters_own_binary_is_the_clusters(tmp_path: Path) -> None:
    """The same file naming a process started from the cluster's own bin/ (as kwokctl
    starts every component) counts: that cluster is orphaned."""
    cluster = LocalCluster(tmp_path / "dead")
    binary = cluster.cluster_dir / "bin" / "etcd"
    binary.parent.mkdir(parents=True)
    sleep = shutil.which("sleep")
    assert sleep is not None
    shutil.copy(sleep, binary)
    component = subprocess.Popen([str(binary), "300"])
    try:
        _session_left_behind(tmp_path / "dead", component.pid)
        assert cluster.pids() == {"etcd": component.pid}
        assert cluster.is_orphaned()
    finally:
        component.kill()
        component.wait()
    # Exited (a zombie until reaped, then gone): no longer the cluster's.
    assert cluster.pids() == {}
    assert not cluster.is_orphaned()
