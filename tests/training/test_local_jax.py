"""``kubetrain run --local`` of upstream's JAXJob example (training-operator v1.9.0,
``examples/jax/cpu-demo``: ``demo.yaml`` and its ``train.py``, both unchanged) with real
JAX (``jax[cpu]``, installed by ``make test``): two processes initialize
``jax.distributed`` from the environment upstream's controller injects
(``COORDINATOR_ADDRESS``/``PORT``, ``NUM_PROCESSES``, ``PROCESS_ID``), see each other's
device and all-reduce over gloo; and the same example converted to a TrainJob
(``kubetrain convert --to trainjob``) on upstream Trainer's ``jax-distributed`` runtime."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.training.helpers import REPO_ROOT, kubetrain, load_manifest, write_manifest

CPU_DEMO = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/jax/cpu-demo"
DEMO = CPU_DEMO / "demo.yaml"
RUNTIME = (
    REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes/jax_distributed.yaml"
)
#: The JAXJob's variables from the TrainJob's (the report's note names both; docs/convert.md
#: shows this line), for a program that reads the JAXJob's, as upstream's train.py does.
AS_A_JAXJOB = (
    'export PROCESS_ID="$JAX_PROCESS_ID" NUM_PROCESSES="$JAX_NUM_PROCESSES" '
    'COORDINATOR_ADDRESS="${JAX_COORDINATOR_ADDRESS%:*}" '
    'COORDINATOR_PORT="${JAX_COORDINATOR_ADDRESS##*:}"; exec "$@"'
)


def test_upstream_cpu_demo_runs_with_real_jax_across_two_processes(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "demo.yaml")
    shutil.copy(CPU_DEMO / "train.py", tmp_path / "train.py")
    result = kubetrain("run", "--local", "--workdir", str(tmp_path), str(tmp_path / "demo.yaml"))
    assert result.returncode == 0, result.output
    for index in (0, 1):
        # Each process is one of two, sees both processes' CPU devices, and the psum of
        # one 1.0 per device across the group is 2 on both.
        assert f"[worker-{index}] JAX process {index}/1 initialized" in result.output
        assert f"[worker-{index}] JAX device count:2" in result.output
        assert f"[worker-{index}] [2.]" in result.output
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


def test_the_cpu_demo_converted_to_a_trainjob_runs_with_real_jax(tmp_path: Path) -> None:
    shutil.copy(CPU_DEMO / "train.py", tmp_path / "train.py")
    converted = tmp_path / "converted"
    result = kubetrain("convert", "--to", "trainjob", str(DEMO), "-o", str(converted))
    # Exit 1: upstream's imagePullPolicy has no place in a TrainJob, and the report says so.
    assert result.returncode == 1, result.output
    worker = "spec.jaxReplicaSpecs.Worker.template.spec.containers[0]"
    assert f'dropped: {worker}.imagePullPolicy ("Always")' in result.output
    assert 'decide: kind ("JAXJob"): the program reads JAX_COORDINATOR_ADDRESS' in result.output
    trainjob = load_manifest(converted / "demo.yaml")
    assert trainjob["spec"]["trainer"]["command"] == ["python3", "train.py"]
    trainjob["spec"]["trainer"]["command"] = ["sh", "-c", AS_A_JAXJOB, "sh", "python3", "train.py"]
    manifest = write_manifest(trainjob, tmp_path / "trainjob.yaml")
    result = kubetrain(
        "run", "--local", "--workdir", str(tmp_path), str(manifest), "--runtime", str(RUNTIME)
    )
    assert result.returncode == 0, result.output
    for index in (0, 1):
        # Node i is the JAXJob's Worker i: the same process ids, the same all-reduce.
        assert f"[node-{index}] JAX process {index}/1 initialized" in result.output
        assert f"[node-{index}] JAX device count:2" in result.output
        assert f"[node-{index}] [2.]" in result.output
    assert "TrainJob/jaxjob-simple Complete" in result.output
