"""LocalCluster's choice of scheduler, the coscheduling scheduler's configuration, and
which processes a cluster directory's pid files name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster.local import (
    COSCHEDULING_SCHEDULER_NAME,
    SCHEDULERS,
    LocalCluster,
    coscheduling_config,
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
