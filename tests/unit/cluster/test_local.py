"""LocalCluster's choice of scheduler, the coscheduling scheduler's configuration, the
kwokctl configuration of a cluster with metrics, and which processes a cluster
directory's pid files name."""

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
from cluster.metrics import HPA_ARGS
from cluster.tools import ToolDirs, Tools, Versions
from kubetrain.manifest import parse_yaml_all


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


def _kwokctl_config(tmp_path: Path, **options: Any) -> dict[str, Any]:
    versions = Versions.pinned()
    tools = Tools(versions=versions, dirs=ToolDirs.for_versions(versions))
    cluster = LocalCluster(tmp_path, tools=tools, **options)
    documents = list(parse_yaml_all(cluster._kwokctl_config()))
    config: dict[str, Any] = documents[0]
    assert config["kind"] == "KwokctlConfiguration"
    return config


def _args(config: dict[str, Any], component: str) -> dict[str, str]:
    return {
        arg["key"]: arg["value"]
        for patch in config.get("componentsPatches", [])
        if patch["name"] == component
        for arg in patch["extraArgs"]
    }


def test_a_cluster_runs_no_metrics_server_unless_asked(tmp_path: Path) -> None:
    config = _kwokctl_config(tmp_path)
    assert "enableMetricsServer" not in config["options"]
    assert "metrics-server" not in {p["name"] for p in config["componentsPatches"]}
    assert LocalCluster(tmp_path).with_metrics is False


@pytest.mark.parametrize("scheduler", ["kube", "coscheduling"])
def test_the_controller_manager_and_scheduler_run_without_leader_election(
    tmp_path: Path, scheduler: str
) -> None:
    # With it they exit once the API server is away past their renew deadline (the
    # faults tier stops it), and nothing starts them again.
    config = _kwokctl_config(tmp_path, scheduler=scheduler)
    assert _args(config, "kube-controller-manager") == {"leader-elect": "false"}
    assert _args(config, "kube-scheduler") == {"leader-elect": "false"}
    assert coscheduling_config()["leaderElection"] == {"leaderElect": False}


def test_with_metrics_kwokctl_runs_the_built_metrics_server_behind_the_aggregator(
    tmp_path: Path,
) -> None:
    config = _kwokctl_config(tmp_path, metrics=True)
    options = config["options"]
    assert options["enableMetricsServer"] is True
    assert options["metricsServerBinary"].endswith("/bin/metrics-server")
    assert options["metricsServerManifests"][0].endswith("/manifests/overlays/release")
    assert options["enableCRDs"] == ["ResourceUsage", "ClusterResourceUsage"]
    apiserver = _args(config, "kube-apiserver")
    assert apiserver["requestheader-client-ca-file"].endswith("/pki/ca.crt")
    assert apiserver["requestheader-allowed-names"] == "kwok-admin"
    assert apiserver["requestheader-username-headers"] == "X-Remote-User"
    assert _args(config, "metrics-server")["metric-resolution"] == "10s"
    assert _args(config, "kube-controller-manager") == {**dict(HPA_ARGS), "leader-elect": "false"}
    assert (
        _args(config, "kube-controller-manager")[
            "horizontal-pod-autoscaler-downscale-stabilization"
        ]
        == "10s"
    )


def test_metrics_and_the_real_node_patch_kube_apiserver_together(tmp_path: Path) -> None:
    config = _kwokctl_config(tmp_path, metrics=True, real_node=True)
    apiserver = _args(config, "kube-apiserver")
    assert "advertise-address" in apiserver and "requestheader-client-ca-file" in apiserver


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
