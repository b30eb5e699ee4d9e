"""``kubetrain run --local`` of upstream's XGBoostJob example with small real processes: the
Master serves a tracker on ``MASTER_ADDR:MASTER_PORT`` (as XGBoost's Rabit tracker does)
and every Worker reaches it with its ``RANK``, all from the environment the operator
injects; the Master's exit decides the job."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.training.helpers import REPO_ROOT, kubetrain, load_manifest, with_command, write_manifest

EXAMPLE = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/xgboost/xgboostjob.yaml"

TRACKER = """
import os, socket, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
tracker = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
workers = os.environ["WORKER_ADDRS"].split(",")
print("ENV", rank, world, len(workers), os.environ["PYTHONUNBUFFERED"])
if rank == 0:
    server = socket.create_server(tracker)
    print("TRACKER", sorted(int(server.accept()[0].recv(8)) for _ in range(world - 1)))
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = socket.create_connection(tracker)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    conn.sendall(str(rank).encode())
    conn.close()
"""


def test_workers_reach_the_masters_tracker_and_the_master_decides(tmp_path: Path) -> None:
    job = with_command(load_manifest(EXAMPLE), [sys.executable, "-c", TRACKER])
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "xgb.yaml")))
    assert result.returncode == 0, result.output
    lines = result.output.splitlines()
    assert "[master-0] TRACKER [1, 2]" in lines, result.output
    for label, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        assert f"[{label}] ENV {rank} 3 2 1" in lines, result.output
    assert "XGBoostJob/xgboost-dist-iris-test-train Succeeded" in result.output
