"""``kubetrain convert``: converted YAML to stdout or a folder, a report per document on
stderr, exit 1 when a field was not carried or a document failed, never over an input."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from kubetrain.cli import main
from kubetrain.manifest import parse_yaml, parse_yaml_all
from tests.conftest import EXAMPLES, REPO_ROOT

DATA = REPO_ROOT / "tests" / "data" / "convert"
OLDER = REPO_ROOT / "tests" / "data" / "upstream-older"
TF_DOCS = DATA / "docs-tfjob-v1beta1.yaml"
MPI_DOCS = DATA / "docs-mpijob-v1alpha2.yaml"


def test_writes_the_converted_stream_to_stdout_and_a_report_per_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["convert", str(TF_DOCS), str(MPI_DOCS)]) == 0
    out, err = capsys.readouterr()
    documents = list(parse_yaml_all(out))
    assert [(d["kind"], d["apiVersion"]) for d in documents] == [
        ("TFJob", "kubeflow.org/v1"),
        ("MPIJob", "kubeflow.org/v2beta1"),
        ("MPIJob", "kubeflow.org/v2beta1"),
    ]
    assert documents[1]["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert f"{TF_DOCS} document 1: TFJob/tfjob-docs kubeflow.org/v1: everything carried" in err
    assert f"{MPI_DOCS} document 2: MPIJob/pi-intel" in err
    assert 'carried: spec.cleanPodPolicy -> spec.runPolicy.cleanPodPolicy ("All")' in err


def test_the_output_passes_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in sorted(OLDER.rglob("*.yaml"))]
    out = tmp_path / "out"
    # Upstream's files share names across folders: one folder per input.
    for index, file in enumerate(files):
        assert main(["convert", file, "-o", str(out / str(index))]) == 0, capsys.readouterr().err
    written = sorted(str(p) for p in out.rglob("*.yaml"))
    assert len(written) == len(files)
    capsys.readouterr()
    assert main(["validate", *written]) == 0, capsys.readouterr().err


def test_exits_1_and_lists_what_was_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(TF_DOCS.read_text().replace("ttlSecondsAfterFinished: 600", "backoffLimit: 3"))
    assert main(["convert", str(old)]) == 1
    out, err = capsys.readouterr()
    assert parse_yaml(out)["apiVersion"] == "kubeflow.org/v1"  # still written
    assert "TFJob/tfjob-docs kubeflow.org/v1: 1 field(s) not carried" in err
    assert "dropped: spec.backoffLimit (3): not a field of TFJob kubeflow.org/v1beta1" in err
    assert "1 of 1 file(s) not fully converted" in err


def test_writes_one_file_per_input_into_a_folder_and_never_over_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "jobs.yaml"
    shutil.copy(TF_DOCS, source)
    original = source.read_text()
    out = tmp_path / "converted"
    assert main(["convert", str(source), "-o", str(out)]) == 0
    written = (out / "jobs.yaml").read_text()
    assert parse_yaml(written)["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 600
    assert f"{source}: written to {out / 'jobs.yaml'}" in capsys.readouterr().err
    # An existing output file needs --overwrite ...
    assert main(["convert", str(source), "-o", str(out)]) == 2
    assert "already exists: remove it or pass --overwrite" in capsys.readouterr().err
    assert main(["convert", str(source), "-o", str(out), "--overwrite"]) == 0
    assert (out / "jobs.yaml").read_text() == written
    # ... and the input file is never written over, --overwrite or not.
    assert main(["convert", str(source), "-o", str(tmp_path), "--overwrite"]) == 2
    assert "is the input file itself" in capsys.readouterr().err
    assert source.read_text() == original


def test_rejects_a_damaged_file_and_an_unknown_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / "damaged.yaml"
    damaged.write_text("apiVersion: kubeflow.org/v1beta1\nkind: TFJob\nspec: [unclosed\n")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(TF_DOCS.read_text().replace("v1beta1", "v1alpha2"))
    missing = tmp_path / "missing.yaml"
    out = tmp_path / "out"
    assert main(["convert", str(damaged), str(unknown), str(missing), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{damaged}: 1 error(s)" in err
    assert (
        f'{unknown} document 1: 1 error(s):\n  apiVersion: "kubeflow.org/v1alpha2" is invalid: '
        "must be kubeflow.org/v1, or an older version kubetrain converts: "
        "kubeflow.org/v1beta1, kubeflow.org/v1beta2" in err
    )
    assert f"{missing}: cannot read: No such file or directory" in err
    assert "3 of 3 file(s) not fully converted" in err
    assert "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())  # nothing written for a failed file


def test_a_file_with_a_failing_document_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "stream.yaml"
    bad = TF_DOCS.read_text().replace("replicas: 3", "replicas: -3")
    stream.write_text(f"{TF_DOCS.read_text()}---\n{bad}")
    assert main(["convert", str(stream)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "document 2: 1 error(s)" in err and "replicas: -3 is invalid" in err


def test_passes_current_objects_through(capsys: pytest.CaptureFixture[str]) -> None:
    example = EXAMPLES / "tfjob.yaml"
    assert main(["convert", str(example)]) == 0
    out, err = capsys.readouterr()
    assert parse_yaml(out) == parse_yaml(example.read_text())
    assert "already the served version: unchanged" in err


def test_rejects_runtime_without_trainjob_and_a_target_that_does_not_fit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["convert", str(TF_DOCS), "--runtime", "torch-distributed"]) == 2
    assert "--runtime applies only with --to trainjob" in capsys.readouterr().err
    assert main(["convert", str(TF_DOCS), "--to", "v2beta1"]) == 1
    assert "a TFJob converts to v1 (its served version) or trainjob" in capsys.readouterr().err


def test_validate_names_the_convert_command_for_an_older_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", str(MPI_DOCS)]) == 1
    err = capsys.readouterr().err
    assert (
        'apiVersion: "kubeflow.org/v1alpha2" is invalid: must be kubeflow.org/v2beta1 for a '
        f"MPIJob (kubeflow.org/v1alpha2 is an older version: `kubetrain convert {MPI_DOCS}` "
        "converts it)" in err
    )


def test_an_older_pytorchjob_becomes_a_trainjob_with_nothing_of_the_users_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The version step writes the old default cleanPodPolicy the user never set; a
    TrainJob has no place for it, and that is no field of the user's lost (exit 0)."""
    source = tmp_path / "pytorchjob-v1beta1.yaml"
    source.write_text(
        (DATA / "pytorchjob-v1beta1.yaml")
        .read_text()
        .replace("  ttlSecondsAfterFinished: 300\n", "")
    )
    assert "cleanPodPolicy" not in source.read_text()
    assert "ttlSecondsAfterFinished" not in source.read_text()
    assert main(["convert", str(source), "--to", "trainjob"]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    (trainjob,) = list(parse_yaml_all(out))
    assert (trainjob["apiVersion"], trainjob["kind"]) == (
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
    )
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert trainjob["spec"]["trainer"]["numNodes"] == 4
    assert "cleanPodPolicy" not in err


def test_a_tfjob_cannot_become_a_trainjob(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(TF_DOCS), "--to", "trainjob"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "TFJob" in err and "TensorFlow" in err
    assert "Traceback" not in err


def test_a_jaxjob_and_an_xgboostjob_become_trainjobs_with_a_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    upstream = REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0"
    jax = upstream / "jax" / "cpu-demo" / "demo.yaml"
    xgboost = upstream / "xgboost" / "smoke-dist" / "xgboostjob_v1_rabit_test.yaml"
    # Exit 1: upstream's imagePullPolicy (and the XGBoostJob's ports and restart policies)
    # have no place in a TrainJob.
    assert main(["convert", str(jax), str(xgboost), "--to", "trainjob"]) == 1
    out, err = capsys.readouterr()
    trainjobs = list(parse_yaml_all(out))
    assert [
        (t["kind"], t["metadata"]["name"], t["spec"]["runtimeRef"]["name"]) for t in trainjobs
    ] == [
        ("TrainJob", "jaxjob-simple", "jax-distributed"),
        ("TrainJob", "xgboost-dist-test", "xgboost-distributed"),
    ]
    assert [t["spec"]["trainer"]["numNodes"] for t in trainjobs] == [2, 3]
    heading = "trainer.kubeflow.org/v1alpha1: {} field(s) not carried"
    assert f"{jax} document 1: TrainJob/jaxjob-simple {heading.format(1)}" in err
    assert f"{xgboost} document 1: TrainJob/xgboost-dist-test {heading.format(4)}" in err
    assert (
        'decide: kind -> spec.runtimeRef.name ("JAXJob"): no runtime named: jax-distributed '
        "is the jax default" in err
    )
    assert 'decide: kind ("XGBoostJob"): the program reads DMLC_TRACKER_URI' in err
    assert (
        "dropped: spec.jaxReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy "
        '("Always")' in err
    )
    assert "2 of 2 file(s) not fully converted" in err


def test_the_readme_tour_converts_the_design_documents_old_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's one convert command, run as written on the old manifests it names (a
    TFJob ``v1beta1`` and MPIJobs ``v1alpha2``, in the design documents' shape), converts
    them all; and validate, which the README says refuses them, names the command."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"^kubetrain convert [^\n]*$", readme, re.M)
    argv, _, redirect = command.partition(" > ")
    (tmp_path / "old").mkdir()
    shutil.copy(TF_DOCS, tmp_path / "old" / "tfjob-v1beta1.yaml")
    shutil.copy(MPI_DOCS, tmp_path / "old" / "mpijob-v1alpha2.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "old/tfjob-v1beta1.yaml"]) == 1
    assert "`kubetrain convert old/tfjob-v1beta1.yaml` converts it" in capsys.readouterr().err
    assert main(shlex.split(argv)[1:]) == 0
    out, err = capsys.readouterr()
    assert redirect == "jobs.yaml"
    (tmp_path / redirect).write_text(out)
    assert [(d["kind"], d["apiVersion"]) for d in parse_yaml_all(out)] == [
        ("TFJob", "kubeflow.org/v1"),
        ("MPIJob", "kubeflow.org/v2beta1"),
        ("MPIJob", "kubeflow.org/v2beta1"),
    ]
    assert "everything carried" in err
    assert main(["validate", redirect]) == 0
