"""``kubetrain run --local`` of upstream's PaddleJob example (training-operator v1.9.0,
``examples/paddlepaddle/simple-cpu.yaml``, unchanged) with real PaddlePaddle
(``paddlepaddle``, installed by ``make test``): both workers start
``paddle.distributed.launch run_check``, meet at the ``PADDLE_MASTER`` the operator's
environment names (Worker 0's address), and train one data-parallel model of degree 2."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.training.helpers import REPO_ROOT, kubetrain

EXAMPLE = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/paddlepaddle/simple-cpu.yaml"


def test_upstream_simple_cpu_runs_with_real_paddle_across_two_workers(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "simple-cpu.yaml")
    result = kubetrain(
        "run", "--local", "--workdir", str(tmp_path), str(tmp_path / "simple-cpu.yaml")
    )
    assert result.returncode == 0, result.output
    for index in (0, 1):
        # Each launcher takes the job's size and its master from the environment...
        assert f"[worker-{index}] LAUNCH WARNING args nnodes will be overridden by env: " in (
            result.output
        )
        assert f"[worker-{index}] Distributed training completed" in result.output
    # ...and the two met: one data-parallel group over both ranks.
    assert "dp_degree: 2" in result.output and "dp_group: [0, 1]" in result.output
    assert "PaddleJob/paddle-simple-cpu Succeeded" in result.output
    assert "all 2 workers completed" in result.output
