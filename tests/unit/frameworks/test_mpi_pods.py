"""The MPI launcher/worker contract in the pods: the SSH Secret in every pod, the
ConfigMap in the launcher, each kind with its upstream's names and modes."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.frameworks.mpi_pods import MPIJOB_LAYOUT, TRAINJOB_LAYOUT, PodLayout, mount


def pod_spec() -> dict[str, Any]:
    return {
        "volumes": [{"name": "ssh-auth", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
        "containers": [
            {"name": "main", "volumeMounts": [{"name": "mpi-job-config", "mountPath": "/x"}]},
            {"name": "side"},
        ],
    }


def test_the_launcher_mounts_the_keys_and_the_config_map_replacing_same_named_volumes() -> None:
    spec = pod_spec()
    mount(
        spec,
        MPIJOB_LAYOUT,
        secret="job-ssh-abc",
        ssh_path="/root/.ssh",
        config_map="job-config",
        containers=spec["containers"][:1],
    )
    assert [v["name"] for v in spec["volumes"]] == ["data", "ssh-auth", "mpi-job-config"]
    assert spec["volumes"][1]["secret"]["secretName"] == "job-ssh-abc"
    assert spec["volumes"][1]["secret"]["defaultMode"] == 0o600
    assert spec["volumes"][2]["configMap"]["items"] == [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "ssh-auth", "mountPath": "/root/.ssh"},
        {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
    ]
    assert "volumeMounts" not in spec["containers"][1]


@pytest.mark.parametrize(
    ("layout", "ssh_path", "default_mode", "modes"),
    [
        pytest.param(MPIJOB_LAYOUT, "/root/.ssh", 0o600, [None, None, None], id="mpijob-root"),
        pytest.param(MPIJOB_LAYOUT, "/home/u/.ssh", 0o644, [None, None, None], id="mpijob-user"),
        pytest.param(TRAINJOB_LAYOUT, "/root/.ssh", 0o400, [0o640, 0o644, 0o644], id="trainjob"),
    ],
)
def test_a_worker_mounts_only_the_keys_with_its_kinds_modes(
    layout: PodLayout, ssh_path: str, default_mode: int, modes: list[int | None]
) -> None:
    spec = pod_spec()
    mount(
        spec,
        layout,
        secret="s",
        ssh_path=ssh_path,
        config_map=None,
        containers=spec["containers"],
    )
    secret = next(v for v in spec["volumes"] if v["name"] == layout.ssh_volume)["secret"]
    assert secret["defaultMode"] == default_mode
    assert [item["path"] for item in secret["items"]] == ["id_rsa", "id_rsa.pub", "authorized_keys"]
    assert [item.get("mode") for item in secret["items"]] == modes
    assert layout.config_volume not in [v["name"] for v in spec["volumes"]]
    for container in spec["containers"]:
        assert container["volumeMounts"][-1] == {"name": layout.ssh_volume, "mountPath": ssh_path}
