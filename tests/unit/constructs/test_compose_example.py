"""docs/constructs.md's composition example runs as written and synthesizes valid objects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kubetrain.manifest import parse_yaml_all
from tests.conftest import EXAMPLES
from tests.k8s_schema import assert_valid


def test_compose_example_runs_quietly_and_is_valid(tmp_path: Path) -> None:
    script = EXAMPLES / "compose.py"
    assert len(script.read_text().splitlines()) < 20
    env = {
        k: v for k, v in os.environ.items() if k != "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
    }
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "end-of-life" not in result.stderr + result.stdout
    objects = list(parse_yaml_all((tmp_path / "dist" / "training.k8s.yaml").read_text()))
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("PyTorchJob") == 1 and "Deployment" in kinds and "DaemonSet" in kinds
    assert_valid(objects)
    job = next(o for o in objects if o["kind"] == "PyTorchJob")
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3 and job["spec"]["nprocPerNode"] == "8"
    pod = worker["template"]["spec"]
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    env_names = {e["name"] for e in pod["containers"][0]["env"]}
    assert {"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"} <= env_names
    assert pod["containers"][0]["resources"]["limits"]["rdma/ib"] == 1
