"""``kubetrain run --local`` of a PaddleJob: upstream's example planned with the operator's
environment on loopback, and real processes meeting at ``PADDLE_MASTER``."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

from kubetrain.api.loader import load_job
from kubetrain.local.execute import execute
from kubetrain.local.plan import plan_local_run
from kubetrain.manifest import parse_yaml
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/paddlepaddle/simple-cpu.yaml"

#: Worker 0 listens where its PADDLE_MASTER says (its own IP, through POD_IP_DUMMY);
#: Worker 1 connects to its PADDLE_MASTER and says who it is.
RENDEZVOUS = """
import os, socket, time
host, port = os.environ["PADDLE_MASTER"].rsplit(":", 1)
if os.environ["POD"].endswith("-0"):
    server = socket.create_server((host, int(port)))
    conn, _ = server.accept()
    print("worker-0 heard", conn.recv(64).decode(), "of", os.environ["PADDLE_NNODES"])
else:
    for _ in range(200):
        try:
            socket.create_connection((host, int(port))).sendall(os.environ["POD"].encode())
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
"""


def test_upstream_example_is_planned_on_loopback_with_upstreams_environment(
    tmp_path: Path,
) -> None:
    job = load_job(parse_yaml(EXAMPLE.read_text()))
    plan = plan_local_run(job, scratch=tmp_path, ports=[41000, 41001])
    assert [(r.replica_type, r.index) for r in plan.replicas] == [("Worker", 0), ("Worker", 1)]
    for replica in plan.replicas:
        assert replica.argv == ["python", "-m", "paddle.distributed.launch", "run_check"]
        env = {k: v for k, v in replica.env.items() if k.startswith(("PADDLE_", "POD_IP"))}
        expected = {
            "PADDLE_JOB_ID": "paddle-simple-cpu",
            "PADDLE_NNODES": "2",
            "PADDLE_MASTER": "127.0.0.1:41000",
        }
        if replica.index == 0:
            # The pod's IP, which its PADDLE_MASTER refers to, is this machine's.
            expected["POD_IP_DUMMY"] = "127.0.0.1"
        assert env == expected


def _rendezvous_job() -> dict[str, Any]:
    job: dict[str, Any] = parse_yaml(EXAMPLE.read_text())
    (container,) = job["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    container["command"] = [sys.executable, "-c", RENDEZVOUS]
    container["args"] = []
    container["env"] = [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    return job


def test_real_processes_meet_at_paddle_master_and_every_worker_decides(tmp_path: Path) -> None:
    plan = plan_local_run(load_job(_rendezvous_job()), scratch=tmp_path)
    out = io.StringIO()
    outcome = execute(plan, workdir=tmp_path, out=out)
    text = out.getvalue()
    assert outcome.phase == "Succeeded", text
    assert outcome.reason == "all 2 workers completed"
    assert outcome.exit_codes == {"worker-0": 0, "worker-1": 0}
    assert "[worker-0] worker-0 heard paddle-simple-cpu-worker-1 of 2\n" in text
    # No start order: both start at once, as upstream creates both pods at once.
    assert " waits for " not in text, text
