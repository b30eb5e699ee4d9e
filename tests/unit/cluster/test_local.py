"""LocalCluster's choice of scheduler, the coscheduling scheduler's configuration, and
which processes a cluster directory's pid files name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cluster.local import (
    COSCHEDULING_SCHEDULER_NAME,
    SCHEDULERS,
    LocalCluster,
    coscheduling_config,
    stop_orphaned_clusters,
)


def test_runs_kube_scheduler_unless_told_otherwise(tmp_path: Path) -> None:
    assert LocalCluster(tmp_path).scheduler == "kube"
    assert LocalCluster(tmp_path, scheduler="coscheduling").scheduler == "coscheduling"
    assert SCHEDULERS == ("kube", "coscheduling")


def test_rejects_an_unknown_scheduler(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"scheduler 'volcano' is not one .* kube, coscheduling"):
        LocalCluster(tmp_path, scheduler="volcano")  # type: ignore[arg-type]


def test_the_running_scheduler_is_read_from_the_work_directory(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path)
    assert cluster.running_scheduler() == "kube"
    cluster.scheduler_config_path.write_text("kind: KubeSchedulerConfiguration\n")
    assert cluster.running_scheduler() == "coscheduling"


def test_coscheduling_is_the_queue_sort_and_every_extension_point() -> None:
    config = coscheduling_config(permit_waiting_seconds=30)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    # The default name (every pod goes through it) and scheduler-plugins' own, which
    # gang-scheduled pods name by default.
    names = [p["schedulerName"] for p in config["profiles"]]
    assert names == [COSCHEDULING_SCHEDULER_NAME, "scheduler-plugins-scheduler"]
    assert COSCHEDULING_SCHEDULER_NAME == "default-scheduler"
    for profile in config["profiles"]:
        plugins: dict[str, Any] = profile["plugins"]
        assert plugins["multiPoint"] == {"enabled": [{"name": "Coscheduling"}]}
        # The queue sort is exclusive: the default PrioritySort must be disabled.
        assert plugins["queueSort"] == {
            "enabled": [{"name": "Coscheduling"}],
            "disabled": [{"name": "*"}],
        }
        assert profile["pluginConfig"] == [
            {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 30}}
        ]


def test_rejects_a_permit_wait_under_a_second() -> None:
    with pytest.raises(ValueError, match=r"permit_waiting_seconds is 0: expected at least 1"):
        coscheduling_config(permit_waiting_seconds=0)


# Pid files: kwokctl writes the pid alone, and pids are reused --------------------------


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
