"""``kubetrain run --local`` with small real processes: environment, status, cleanup."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.training.helpers import HANG_GUARD_SECONDS, REPO_ROOT, kubetrain, write_manifest

PRINT_ENV = (
    "import json, os; print('ENV ' + json.dumps({k: os.environ.get(k) for k in "
    "['MASTER_ADDR', 'MASTER_PORT', 'WORLD_SIZE', 'RANK', 'PET_NNODES', 'PYTHONUNBUFFERED', "
    "'POD', 'FROM_MANIFEST', 'EXTRA']}))"
)


def container(command: list[str], **extra: Any) -> dict[str, Any]:
    return {"name": "pytorch", "image": "example/none:1", "command": command, **extra}


def pytorch_job(
    master: dict[str, Any], worker: dict[str, Any], workers: int = 1, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "local-test"},
        "spec": {
            **spec,
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [master]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [worker]}}},
            },
        },
    }


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A killed process lingers as a zombie until its parent
    (init, for orphans) reaps it, so the state is polled for a few seconds first."""
    deadline = time.monotonic() + 10
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)


def test_replicas_get_the_operator_environment(tmp_path: Path) -> None:
    env = [
        {"name": "FROM_MANIFEST", "value": "rank-$(RANK)"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    cmd = ["python", "-c", PRINT_ENV]
    job = pytorch_job(container(cmd, env=env), container(cmd, env=env), workers=2)
    result = kubetrain(
        "run", "--local", str(write_manifest(job, tmp_path / "j.yaml")), "--env", "EXTRA=yes"
    )
    assert result.returncode == 0, result.output
    seen = {}
    for line in result.output.splitlines():
        label, _, rest = line.partition("] ENV ")
        if rest:
            seen[label.lstrip("[")] = json.loads(rest)
    assert sorted(seen) == ["master-0", "worker-0", "worker-1"], result.output
    ports = {values["MASTER_PORT"] for values in seen.values()}
    assert len(ports) == 1 and ports != {"23456"}  # a free local port, the same for all
    for label, rank in (("master-0", "0"), ("worker-0", "1"), ("worker-1", "2")):
        assert seen[label] | {"MASTER_PORT": "*"} == {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "*",
            "WORLD_SIZE": "3",
            "RANK": rank,
            "PET_NNODES": "3",
            "PYTHONUNBUFFERED": "1",
            "POD": f"local-test-{label}",
            # manifest variables see the injected ones only where the kubelet would:
            # $(RANK) is not defined before the manifest's own env, so it stays literal
            "FROM_MANIFEST": "rank-$(RANK)",
            "EXTRA": "yes",
        }


def test_arguments_expand_injected_variables(tmp_path: Path) -> None:
    cmd = ["sh", "-c", 'echo "rank=$1 of $2"', "sh", "$(RANK)", "$(WORLD_SIZE)"]
    job = pytorch_job(container(cmd), container(cmd))
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "j.yaml")))
    assert result.returncode == 0, result.output
    assert "[master-0] rank=0 of 2" in result.output
    assert "[worker-0] rank=1 of 2" in result.output


def test_failed_replica_fails_the_job_with_its_exit_code_and_stops_the_rest(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "master.pid"
    master = container(["sh", "-c", f"echo $$$$ > {pid_file}; exec sleep 300"])
    worker = container(["sh", "-c", f"while [ ! -s {pid_file} ]; do sleep 0.1; done; exit 3"])
    result = kubetrain(
        "run", "--local", str(write_manifest(pytorch_job(master, worker), tmp_path / "j.yaml"))
    )
    assert result.returncode == 3, result.output
    assert "Failed" in result.output and "worker-0 exited with code 3" in result.output
    assert not pid_alive(int(pid_file.read_text())), "the master was left running"


def test_tfjob_succeeds_when_worker_0_does_and_the_ps_is_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "ps.pid"

    def spec(command: list[str], replicas: int) -> dict[str, Any]:
        tf = {"name": "tensorflow", "image": "example/none:1", "command": command}
        return {"replicas": replicas, "template": {"spec": {"containers": [tf]}}}

    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf-local"},
        "spec": {
            "tfReplicaSpecs": {
                "PS": spec(["sh", "-c", f"echo $$$$ > {pid_file}; exec sleep 300"], 1),
                "Worker": spec(
                    [
                        "sh",
                        "-c",
                        f'while [ ! -s {pid_file} ]; do sleep 0.1; done; echo "$TF_CONFIG"',
                    ],
                    2,
                ),
            }
        },
    }
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "tf.yaml")))
    assert result.returncode == 0, result.output
    assert "TFJob/tf-local Succeeded" in result.output
    config = json.loads(
        next(
            line for line in result.output.splitlines() if line.startswith("[worker-1] {")
        ).removeprefix("[worker-1] ")
    )
    assert config["task"] == {"type": "worker", "index": 1}
    assert len(config["cluster"]["worker"]) == 2 and len(config["cluster"]["ps"]) == 1
    assert not pid_alive(int(pid_file.read_text())), "the parameter server was left running"


def test_active_deadline_fails_the_job(tmp_path: Path) -> None:
    sleeper = container(["sleep", "300"])
    job = pytorch_job(sleeper, sleeper, runPolicy={"activeDeadlineSeconds": 1})
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "j.yaml")))
    assert result.returncode == 124, result.output
    assert "DeadlineExceeded" in result.output


def test_ctrl_c_stops_every_process_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    # Each replica starts a child of its own, so cleanup must reach whole process groups.
    cmd = [
        "sh",
        "-c",
        f"sleep 300 & echo $! > {pids}/$(RANK).child; echo $$$$ > {pids}/$(RANK); wait",
    ]
    job = pytorch_job(container(cmd), container(cmd))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetrain.cli",
            "run",
            "--local",
            str(write_manifest(job, tmp_path / "j.yaml")),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while len(list(pids.iterdir())) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    started = sorted(pids.iterdir())
    assert len(started) == 4, f"replicas did not start: {started}"
    time.sleep(0.2)  # let both shells finish writing their pid files
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=HANG_GUARD_SECONDS)
    assert process.returncode == 130, output
    assert "Interrupted" in output
    left = [p.name for p in started if pid_alive(int(p.read_text()))]
    assert left == [], f"processes left running after Ctrl-C: {left}"


def test_rejects_a_container_without_command(tmp_path: Path) -> None:
    bare = {"name": "pytorch", "image": "example/none:1"}
    job = pytorch_job(bare, bare)
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "j.yaml")))
    assert result.returncode == 2
    assert "has no command" in result.output and "--entrypoint" in result.output


def test_requires_local(tmp_path: Path) -> None:
    job = pytorch_job(container(["true"]), container(["true"]))
    result = kubetrain("run", str(write_manifest(job, tmp_path / "j.yaml")))
    assert result.returncode == 2
    assert "only --local is supported" in result.output
