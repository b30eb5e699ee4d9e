"""``kubetrain validate``: summaries on success, every error with its path on failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.cli import main
from kubetrain.manifest import parse_yaml_all
from tests.builders import jobs, trainer
from tests.builders.observed import OBSERVED
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.unit.controller.test_reconciler import setup

GOOD = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))


def test_validate_examples_prints_one_line_per_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *GOOD]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(GOOD)
    assert any(
        "PyTorchJob/pytorch-ddp: Master x1, Worker x3, nprocPerNode 8" in line for line in out
    )
    assert any(
        "MPIJob/horovod: Launcher x1, Worker x2, 8 slot(s) per worker" in line for line in out
    )


def test_rejects_three_mistakes_reporting_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLES / "invalid" / "three-mistakes.yaml")]) == 1
    err = capsys.readouterr().err
    assert 'spec.pytorchReplicaSpecs.Master.restartPolicy: "Sometimes" is invalid' in err
    assert "spec.pytorchReplicaSpecs.Worker.replicas: -1 is invalid: must be >= 0" in err
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.spec.contianers: unknown field: "
        "did you mean 'containers'?" in err
    )


def test_rejects_every_bad_document_in_a_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = (EXAMPLES / "tfjob.yaml").read_text()
    bad = good.replace("replicas: 2", "replicas: -2").replace("name: tf-ps", "name: tf-bad")
    stream = tmp_path / "jobs.yaml"
    stream.write_text(f"{good}\n---\n{bad}\n---\n{bad.replace('kind: TFJob', 'kind: Nope')}")
    assert main(["validate", str(stream)]) == 1
    captured = capsys.readouterr()
    assert "ok" in captured.out and "TFJob/tf-ps" in captured.out
    assert (
        "document 2" in captured.err and "spec.tfReplicaSpecs.Worker.replicas: -2" in captured.err
    )
    assert "document 3" in captured.err and 'kind: "Nope" is invalid' in captured.err
    assert "2 of 3 document(s) invalid" in captured.err


def test_rejects_missing_file_and_bad_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed")
    assert main(["validate", str(tmp_path / "nope.yaml"), str(broken)]) == 1
    err = capsys.readouterr().err
    assert "nope.yaml: cannot read" in err
    assert "broken.yaml" in err and "valid YAML" in err


def test_crds_command_prints_every_crd(capsys: pytest.CaptureFixture[str]) -> None:

    assert main(["crds"]) == 0
    docs = list(parse_yaml_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs] == [
        "pytorchjobs.kubeflow.org",
        "tfjobs.kubeflow.org",
        "mpijobs.kubeflow.org",
        "paddlejobs.kubeflow.org",
        "jaxjobs.kubeflow.org",
        "xgboostjobs.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    ]
    assert main(["crds", "--kind", "TrainJob", "--kind", "ClusterTrainingRuntime"]) == 0
    docs = list(parse_yaml_all(capsys.readouterr().out))
    assert [d["spec"]["names"]["kind"] for d in docs] == ["TrainJob", "ClusterTrainingRuntime"]


def test_console_script_runs() -> None:
    exe = Path(sys.executable).parent / "kubetrain"
    result = subprocess.run(
        [str(exe), "validate", str(EXAMPLES / "mpijob.yaml")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")


# --- hostile files (issue 15 item 1): a message naming the file and path, exit 1 ------------


def _hostile_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, what its message must say)."""
    key = "k" * 100_000
    bomb = "a: &a [" + ",".join(["xxxxxxxx"] * 100) + "]\n"
    bomb += "b: &b [" + ",".join(["*a"] * 100) + "]\n"
    bomb += "c: [" + ",".join(["*b"] * 100) + "]\n"
    snake = (
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: a}\n"
        "spec:\n  pytorch_replica_specs:\n    Worker:\n      template: {spec: x}\n"
    )
    texts: dict[str, tuple[bytes, str]] = {
        "deep": (
            ("kind: PyTorchJob\nspec:\n  x: " + "[" * 900 + "]" * 900 + "\n").encode(),
            "spec.x[0][0]",
        ),
        "not-utf8": (b"kind: PyTorchJob\nmetadata: {name: \xff}\n", "is not UTF-8"),
        "alias-bomb": (bomb.encode(), "once YAML aliases are expanded"),
        "huge-key": (
            # An explicit key: YAML limits implicit ones to 1024 characters.
            f"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {{name: a}}\n"
            f"spec:\n  ? {key}\n  : 1\n".encode(),
            "(100005 characters)",
        ),
        "snake-case": (snake.encode(), "did you mean 'pytorchReplicaSpecs'?"),
        "too-large": (b"a: " + b"x" * (3 * 1024 * 1024) + b"\n", "must be at most 3,145,728"),
        "duplicate-key": (b"kind: PyTorchJob\nkind: TFJob\n", "duplicate key 'kind'"),
    }
    out = {}
    for name, (data, fragment) in texts.items():
        path = tmp_path / f"{name}.yaml"
        path.write_bytes(data)
        out[name] = (path, fragment)
    return out


def _kubetrain(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "kubetrain"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )


def test_rejects_hostile_files_with_a_message_and_no_traceback(tmp_path: Path) -> None:
    files = _hostile_files(tmp_path)
    result = _kubetrain("validate", *(str(path) for path, _ in files.values()))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    for name, (path, fragment) in files.items():
        lines = [line for line in result.stderr.splitlines() if line.startswith(str(path))]
        assert lines, f"{name}: no message for {path}"
        block = result.stderr[result.stderr.index(lines[0]) :][:2000]
        assert fragment in block, f"{name}: {fragment!r} not in {block[:500]!r}"
    assert len(result.stderr) < 20_000  # capped: no file is echoed back
    assert f"{len(files)} of {len(files)} document(s) invalid" in result.stderr


def test_run_local_rejects_hostile_files_the_same_way(tmp_path: Path) -> None:
    for name, (path, fragment) in _hostile_files(tmp_path).items():
        result = _kubetrain("run", "--local", "--dry-run", str(path))
        assert result.returncode == 1, (name, result.stderr[-500:])
        assert "Traceback" not in result.stderr, name
        assert fragment in result.stderr, (name, result.stderr[:500])


def test_validate_reads_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = (EXAMPLES / "tfjob.yaml").read_bytes()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "kubetrain"), "validate", "-"],
        input=manifest,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().startswith("ok -: TFJob/tf-ps")


@pytest.mark.parametrize(
    ("spec", "nproc"),
    [
        ({"nprocPerNode": "4"}, "4"),
        ({"elasticPolicy": {"maxReplicas": 2, "nProcPerNode": 4}}, "4"),
        ({"elasticPolicy": {"maxReplicas": 2}}, "auto"),
        ({}, "auto"),
    ],
    ids=["nprocPerNode", "deprecated-elastic-nProcPerNode", "elastic-without", "neither"],
)
def test_validate_prints_the_nproc_per_node_the_operators_pods_get(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], nproc: str
) -> None:
    raw = jobs.pytorch_job(master=False, workers=2, metadata=dict(OBSERVED), **spec)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"Worker x2, nprocPerNode {nproc}")
    # The operator, reconciling the same job, gives every pod that value.
    cluster, reconciler, key, _ = setup(raw)
    reconciler.reconcile(key)
    pods = cluster.children["Pod"]
    assert set(pods) == {"job-worker-0", "job-worker-1"}
    for pod in pods.values():
        (container,) = pod["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["PET_NPROC_PER_NODE"] == nproc


def test_validate_prints_the_node_count_an_elastic_runtimes_trainjobs_start_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elastic = trainer.runtime(mlPolicy={"torch": {"elasticPolicy": {"minNodes": 2, "maxNodes": 4}}})
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(elastic))
    assert main(["validate", str(path)]) == 0
    line = capsys.readouterr().out.rstrip()
    assert line.endswith(
        "ClusterTrainingRuntime/torch: framework torch, mlPolicy torch, 2 node(s), "
        "replicatedJobs node"
    )


def test_validate_applies_the_clusters_replica_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = (EXAMPLES / "pytorchjob.yaml").read_text().replace("replicas: 3", "replicas: 8")
    path = tmp_path / "job.yaml"
    path.write_text(job)
    assert main(["validate", str(path)]) == 0
    assert main(["validate", "--max-replicas-per-type", "4", str(path)]) == 1
    err = capsys.readouterr().err
    assert (
        "spec.pytorchReplicaSpecs.Worker.replicas: 8 is invalid: replicas must be at most 4 "
        "per replica type" in err
    )
    assert main(["validate", "--max-replicas-per-type", "0", str(path)]) == 2
    assert "max_replicas_per_type (0) must be between 1" in capsys.readouterr().err


def test_validate_accepts_upstreams_examples_but_the_trainjobs_their_runtimes_refuse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths = sorted((REPO_ROOT / "tests" / "data" / "upstream").rglob("*.yaml"))
    files = [str(p) for p in paths]
    documents = sum(len([d for d in parse_yaml_all(p.read_text()) if d]) for p in paths)
    assert len(files) >= 35
    # Every TrainJob is checked with its runtime when one of the files holds it (Trainer's
    # examples hold a runtime and a TrainJob in one file; its shipped runtimes are beside):
    # 05-multi-step's as upstream's webhook refuses it, Flux's as the operator would.
    assert main(["validate", *files]) == 1
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    flux = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/examples/flux"
    refused = [f"{flux / name}.yaml" for name in FLUX_TRAINJOBS]
    assert [line for line in err if line.endswith("error(s):")] == [
        *(f"{path} document 1: 1 error(s):" for path in refused),
        f"{MULTI_STEP} document 2: 1 error(s):",
    ]
    assert f"  {MULTI_STEP_REFUSAL}" in err
    assert sum("kubetrain has no Flux policy" in line for line in err) == len(refused)
    assert err[-1] == f"{len(refused) + 1} of {documents} document(s) invalid"
    assert len(captured.out.splitlines()) == documents - len(refused) - 1


#: Upstream's TrainJobs on its Flux runtime, which kubetrain has no policy to run.
FLUX_TRAINJOBS = ("flux-interactive", "lammps-train-gpus", "lammps-train-job")


#: Upstream's example whose runtime lacks what its TrainJob needs (its webhook refuses it).
MULTI_STEP = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/examples/yaml/05-multi-step.yaml"
MULTI_STEP_REFUSAL = (
    "runtime torch-with-dataset-init (TrainingRuntime) is invalid: must have volumeMount with "
    "name - initializer in container dataset-initializer of the dataset-initializer job"
)


def test_rejects_a_trainjob_its_runtime_makes_invalid_as_upstreams_webhook_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(MULTI_STEP)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"ok {MULTI_STEP}: TrainingRuntime/torch-with-dataset-init: framework torch, "
        "mlPolicy torch, 1 node(s), replicatedJobs dataset-initializer, node"
    ]
    assert f"{MULTI_STEP} document 2: 1 error(s):\n  {MULTI_STEP_REFUSAL}\n" in captured.err
    assert "1 of 2 document(s) invalid" in captured.err


def _split_multi_step(tmp_path: Path, *, mount: bool) -> tuple[Path, Path]:
    """05-multi-step.yaml's runtime and TrainJob in two files (the runtime's
    dataset-initializer given the ``initializer`` volumeMount when ``mount``)."""
    runtime, job = (d for d in parse_yaml_all(MULTI_STEP.read_text()) if d)
    if mount:
        init = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
        (container,) = init["template"]["spec"]["template"]["spec"]["containers"]
        container["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    runtime_file, job_file = tmp_path / "runtime.yaml", tmp_path / "job.yaml"
    runtime_file.write_text(yaml.safe_dump(runtime))
    job_file.write_text(yaml.safe_dump(job))
    return runtime_file, job_file


def test_rejects_a_trainjob_whose_runtime_is_in_a_later_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime_file, job_file = _split_multi_step(tmp_path, mount=False)
    assert main(["validate", str(job_file), str(runtime_file)]) == 1
    captured = capsys.readouterr()
    assert f"{job_file} document 1: 1 error(s):\n  {MULTI_STEP_REFUSAL}\n" in captured.err
    assert f"ok {runtime_file}: TrainingRuntime/torch-with-dataset-init" in captured.out


def test_validate_accepts_the_trainjob_once_its_runtime_mounts_the_initializer_volume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime_file, job_file = _split_multi_step(tmp_path, mount=True)
    assert main(["validate", str(job_file), str(runtime_file)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"ok {job_file}: TrainJob/multi-step-example: TrainingRuntime/torch-with-dataset-init, "
        "2 node(s)"
    )


def test_validate_describes_trainer_objects_and_notes_sdk_traps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = REPO_ROOT / "tests" / "data" / "upstream" / "trainer-v2.3.0"
    runtime = upstream / "manifests" / "base" / "runtimes" / "deepspeed_distributed.yaml"
    memory_only = tmp_path / "memory.yaml"
    memory_only.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: m}\n"
        "spec:\n  runtimeRef: {name: torch-distributed}\n"
        "  trainer: {resourcesPerNode: {limits: {memory: 8Gi}}}\n"
    )
    assert main(["validate", str(runtime), str(EXAMPLES / "trainjob.yaml"), str(memory_only)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(
        "ClusterTrainingRuntime/deepspeed-distributed: framework deepspeed, mlPolicy mpi, "
        "1 node(s), replicatedJobs node, launcher"
    )
    assert out[1].endswith("TrainJob/mnist-ddp: ClusterTrainingRuntime/torch-gpu, 4 node(s)")
    assert (
        "TrainJob/m: ClusterTrainingRuntime/torch-distributed, the runtime's node count; " in out[2]
    )
    assert "note: spec.trainer.resourcesPerNode has resource limits with none of" in out[2]


def test_validate_reports_trainer_rules_with_their_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: bad}\n"
        "spec:\n  runtimeRef: {name: torch-distributed}\n  managedBy: me/controller\n"
        "  trainer:\n    numNodes: 0\n    env: [{name: PET_NNODES, value: '4'}]\n"
    )
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad} document 1: 3 error(s):" in err
    assert 'spec.managedBy: "me/controller" is invalid: spec.managedBy must be one of' in err
    assert "spec.trainer.numNodes: 0 is invalid: must be >= 1" in err
    assert 'spec.trainer.env[0].name: "PET_NNODES" is invalid: spec.trainer.env must not set' in err
