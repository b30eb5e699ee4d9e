"""``kubetrain run --local`` of upstream's JAXJob example (training-operator v1.9.0,
``examples/jax/cpu-demo/demo.yaml``, unchanged): two real processes that find each other
through the environment upstream's controller injects. JAX is not in the test
environment, so ``train.py`` here does what ``jax.distributed.initialize`` does with those
variables: process 0 serves the coordinator's address and port, every other process
connects to it and reports its id."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.training.helpers import REPO_ROOT, kubetrain

DEMO = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/jax/cpu-demo/demo.yaml"

RENDEZVOUS = """
import os, socket, time

host, port = os.environ["COORDINATOR_ADDRESS"], int(os.environ["COORDINATOR_PORT"])
count, me = int(os.environ["NUM_PROCESSES"]), int(os.environ["PROCESS_ID"])
if me == 0:
    server = socket.create_server((host, port))
    ids = [0]
    for _ in range(count - 1):
        peer, _ = server.accept()
        ids.append(int(peer.recv(16).decode()))
        peer.close()
    print(f"coordinator saw processes {sorted(ids)} of {count}")
else:
    for _ in range(200):
        try:
            with socket.create_connection((host, port), timeout=1) as link:
                link.sendall(str(me).encode())
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise SystemExit(f"process {me} never reached the coordinator {host}:{port}")
    print(f"process {me} joined {host}:{port}")
"""


def test_upstream_cpu_demo_runs_as_two_processes_that_meet_at_the_coordinator(
    tmp_path: Path,
) -> None:
    shutil.copy(DEMO, tmp_path / "demo.yaml")
    (tmp_path / "train.py").write_text(RENDEZVOUS)
    result = kubetrain("run", "--local", "--workdir", str(tmp_path), str(tmp_path / "demo.yaml"))
    assert result.returncode == 0, result.output
    assert "[worker-0] coordinator saw processes [0, 1] of 2" in result.output
    assert "[worker-1] process 1 joined 127.0.0.1:" in result.output
    assert "JAXJob/jaxjob-simple Succeeded" in result.output
    assert "all 2 workers completed" in result.output


def test_a_failed_jax_worker_fails_the_local_run(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "demo.yaml")
    (tmp_path / "train.py").write_text(
        'import os, sys\nsys.exit(5 if os.environ["PROCESS_ID"] == "1" else 0)\n'
    )
    result = kubetrain("run", "--local", "--workdir", str(tmp_path), str(tmp_path / "demo.yaml"))
    assert result.returncode == 5, result.output
    assert "JAXJob/jaxjob-simple Failed" in result.output
    assert "worker-1 exited with code 5" in result.output
