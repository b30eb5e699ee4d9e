"""``kubetrain.api.convert``: the older Kubeflow versions to the served ones, field by field
as upstream's Go types and controllers of those versions define them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api import JobValidationError, apply_defaults, convert, load_job
from kubetrain.api.convert import Conversion, NoteKind
from kubetrain.api.trainer.loader import load_object
from kubetrain.manifest import parse_yaml_all
from tests.builders.jobs import mpi_job, pytorch_job, template, tf_job
from tests.conftest import REPO_ROOT

OLDER = REPO_ROOT / "tests" / "data" / "upstream-older"
DATA = REPO_ROOT / "tests" / "data" / "convert"
UPSTREAM_FILES = sorted(OLDER.rglob("*.yaml"))


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in parse_yaml_all(path.read_text()) if d]


def _notes(conv: Conversion, kind: NoteKind) -> dict[str, Any]:
    return {n.path: n.value for n in conv.notes if n.kind is kind}


# --- upstream's own examples of the older versions -------------------------------------------


def test_upstream_older_examples_cover_every_older_version() -> None:
    versions = {(d["kind"], d["apiVersion"]) for p in UPSTREAM_FILES for d in _documents(p)}
    assert versions == {
        ("TFJob", "kubeflow.org/v1beta1"),
        ("TFJob", "kubeflow.org/v1beta2"),
        ("PyTorchJob", "kubeflow.org/v1beta1"),
        ("PyTorchJob", "kubeflow.org/v1beta2"),
        ("MPIJob", "kubeflow.org/v1alpha1"),
        ("MPIJob", "kubeflow.org/v1alpha2"),
        ("MPIJob", "kubeflow.org/v1"),
    }
    assert len(UPSTREAM_FILES) == 33


@pytest.mark.parametrize(
    "path", UPSTREAM_FILES, ids=[str(p.relative_to(OLDER)) for p in UPSTREAM_FILES]
)
def test_upstream_older_example_converts_and_validates(path: Path) -> None:
    for document in _documents(path):
        with pytest.raises(JobValidationError):
            load_job(document)  # refused as it is: an older version
        conv = convert(document, source=str(path))
        assert conv.complete, [n.line() for n in conv.notes]
        job = load_object(conv.output)
        assert job.api_version != document["apiVersion"]
        assert job.metadata.name == document["metadata"]["name"]


# --- behaviour preserved: the same job written natively in the target version ----------------

PAIRS = sorted(p.name.removesuffix(".native.yaml") for p in DATA.glob("*.native.yaml"))


@pytest.mark.parametrize("name", PAIRS, ids=PAIRS)
def test_converted_job_equals_the_native_one_after_defaulting(name: str) -> None:
    old = _documents(DATA / f"{name}.yaml")
    native = _documents(DATA / f"{name}.native.yaml")
    assert len(old) == len(native)
    for document, expected in zip(old, native, strict=True):
        converted = load_job(convert(document).output)
        assert apply_defaults(converted) == apply_defaults(load_job(expected))


# --- field by field ----------------------------------------------------------------------------


def test_tfjob_v1beta1_moves_its_policies_into_run_policy() -> None:
    (document,) = _documents(DATA / "docs-tfjob-v1beta1.yaml")
    conv = convert(document)
    assert conv.output["apiVersion"] == "kubeflow.org/v1"
    assert conv.output["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All",
        "ttlSecondsAfterFinished": 600,
    }
    assert "cleanPodPolicy" not in conv.output["spec"]
    assert _notes(conv, NoteKind.CARRIED)["spec.ttlSecondsAfterFinished"] == 600
    assert conv.output["spec"]["tfReplicaSpecs"] == document["spec"]["tfReplicaSpecs"]


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (tf_job, "Running"),
        (pytorch_job, "None"),
    ],
    ids=["tfjob-defaulted-running", "pytorchjob-defaulted-none"],
)
def test_unset_clean_pod_policy_keeps_the_old_default(job: Any, expected: str) -> None:
    document = {**job(), "apiVersion": "kubeflow.org/v1beta1"}
    conv = convert(document)
    assert conv.output["spec"]["runPolicy"] == {"cleanPodPolicy": expected}
    assert _notes(conv, NoteKind.DECIDE)["spec.cleanPodPolicy"] == expected
    assert conv.complete


def test_v1beta1_has_no_backoff_limit_so_it_is_dropped() -> None:
    document = {**tf_job(backoffLimit=3), "apiVersion": "kubeflow.org/v1beta1"}
    conv = convert(document)
    assert not conv.complete
    assert _notes(conv, NoteKind.DROPPED) == {"spec.backoffLimit": 3}
    assert "backoffLimit" not in conv.output["spec"]["runPolicy"]
    # v1beta2 has it.
    conv = convert({**document, "apiVersion": "kubeflow.org/v1beta2"})
    assert conv.complete and conv.output["spec"]["runPolicy"]["backoffLimit"] == 3


def test_unknown_replica_spec_and_pod_fields_are_dropped_with_their_values() -> None:
    document = pytorch_job()
    document["apiVersion"] = "kubeflow.org/v1beta2"
    document["spec"]["pytorchReplicaSpecs"]["Worker"]["minReplicas"] = 2
    document["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["gpus"] = 4
    conv = convert(document)
    dropped = _notes(conv, NoteKind.DROPPED)
    assert dropped == {
        "spec.pytorchReplicaSpecs.Worker.minReplicas": 2,
        "spec.pytorchReplicaSpecs.Worker.template.spec.gpus": 4,
    }
    load_object(conv.output)
    lines = "\n".join(n.line() for n in conv.notes)
    assert "dropped: spec.pytorchReplicaSpecs.Worker.template.spec.gpus (4)" in lines


def test_mpijob_v1alpha2_top_level_policies_end_in_run_policy() -> None:
    first, second = _documents(DATA / "docs-mpijob-v1alpha2.yaml")
    spec = convert(first).output["spec"]
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert spec["slotsPerWorker"] == 1
    conv = convert(second)
    spec = conv.output["spec"]
    assert spec["runPolicy"] == {
        "cleanPodPolicy": "All",
        "backoffLimit": 3,
        "activeDeadlineSeconds": 3600,
    }
    assert spec["slotsPerWorker"] == 4
    assert spec["mpiImplementation"] == "Intel"
    assert "mpiDistribution" not in spec and "cleanPodPolicy" not in spec
    assert _notes(conv, NoteKind.CARRIED)["spec.mpiDistribution"] == "IntelMPI"


def test_mpijob_v1alpha2_run_policy_wins_as_its_controller_read_it() -> None:
    document = mpi_job(
        backoffLimit=6,
        cleanPodPolicy="Running",
        runPolicy={"backoffLimit": 2, "cleanPodPolicy": "All"},
    )
    document["apiVersion"] = "kubeflow.org/v1alpha2"
    conv = convert(document)
    # backoffLimit: runPolicy's took precedence; cleanPodPolicy: the top-level one did.
    assert conv.output["spec"]["runPolicy"] == {"backoffLimit": 2, "cleanPodPolicy": "Running"}
    assert _notes(conv, NoteKind.DROPPED) == {
        "spec.backoffLimit": 6,
        "spec.runPolicy.cleanPodPolicy": "All",
    }


def test_mpijob_v1_launcher_keeps_never_and_main_container_is_noted() -> None:
    (document,) = _documents(DATA / "mpijob-v1.yaml")
    conv = convert(document)
    specs = conv.output["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["restartPolicy"] == "Never"
    assert "mainContainer" not in conv.output["spec"]
    assert conv.complete  # mpi is the worker's first container: nothing lost
    assert _notes(conv, NoteKind.DECIDE)["spec.mainContainer"] == "mpi"
    other = copy.deepcopy(document)
    other["spec"]["mainContainer"] = "sidecar"
    assert _notes(convert(other), NoteKind.DROPPED) == {"spec.mainContainer": "sidecar"}


def test_mpijob_v1_has_no_mpi_distribution() -> None:
    document = {**mpi_job(mpiDistribution="IntelMPI"), "apiVersion": "kubeflow.org/v1"}
    conv = convert(document)
    assert _notes(conv, NoteKind.DROPPED) == {"spec.mpiDistribution": "IntelMPI"}
    assert "mpiImplementation" not in conv.output["spec"]


def _v1alpha1(**spec: Any) -> dict[str, Any]:
    pod = template("horovod")
    pod["spec"]["containers"][0]["command"] = ["mpirun", "python", "train.py"]
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "MPIJob",
        "metadata": {"name": "old"},
        "spec": {"template": pod, **spec},
    }


@pytest.mark.parametrize(
    ("spec", "workers", "per_worker", "slots"),
    [
        ({"gpus": 16}, 16, 1, 1),  # the operator's --gpus-per-node default: 1
        ({"gpus": 16, "gpusPerNode": 8}, 2, 8, 8),
        ({"gpus": 4, "gpusPerNode": 8}, 1, 4, 4),  # fewer than a node: one worker
        ({"gpus": 16, "gpusPerNode": 8, "slotsPerWorker": 2}, 2, 8, 2),
        ({"processingUnits": 8, "processingUnitsPerNode": 4}, 2, 4, 4),
    ],
    ids=["gpus-16", "gpus-16-per-node-8", "gpus-4-per-node-8", "slots-given", "processing-units"],
)
def test_mpijob_v1alpha1_allocates_workers_as_its_controller_did(
    spec: dict[str, Any], workers: int, per_worker: int, slots: int
) -> None:
    conv = convert(_v1alpha1(**spec))
    out = conv.output["spec"]
    worker = out["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == workers
    resource = "cpu" if "processingUnits" in spec else "nvidia.com/gpu"
    if "processingUnits" in spec:
        conv = convert(_v1alpha1(**spec, processingResourceType="cpu"))
        worker = conv.output["spec"]["mpiReplicaSpecs"]["Worker"]
    main = worker["template"]["spec"]["containers"][0]
    assert main["resources"]["limits"] == {resource: per_worker}
    assert "command" not in main  # v1alpha1 workers ran `sleep 365d`, not the command
    launcher = out["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"] == ["mpirun", "python", "train.py"]
    assert out["slotsPerWorker"] == slots
    assert out["runPolicy"]["cleanPodPolicy"] == "Running"
    load_object(conv.output)


def test_mpijob_v1alpha1_replicas_form_keeps_the_workers_limits() -> None:
    document = _v1alpha1(replicas=4, backoffLimit=1)
    document["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 4}
    }
    conv = convert(document)
    specs = conv.output["spec"]["mpiReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 4
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"] == {"limits": {"nvidia.com/gpu": 4}}
    assert "resources" not in specs["Launcher"]["template"]["spec"]["containers"][0]
    assert conv.output["spec"]["slotsPerWorker"] == 4
    assert conv.output["spec"]["runPolicy"]["backoffLimit"] == 1


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ({"gpus": 12, "gpusPerNode": 8}, "spec.gpus", "a multiple of gpusPerNode (8)"),
        ({"gpus": 8, "processingUnits": 8}, "spec.gpus", "not both"),
        ({}, "spec.replicas", "one of gpus, processingUnits or replicas"),
        ({"gpus": "eight"}, "spec.gpus", "must be an integer"),
    ],
    ids=["not-a-multiple", "both-forms", "no-worker-count", "not-a-number"],
)
def test_rejects_a_v1alpha1_job_its_operator_refused(
    spec: dict[str, Any], path: str, fragment: str
) -> None:
    with pytest.raises(JobValidationError) as caught:
        convert(_v1alpha1(**spec), source="old.yaml")
    (error,) = caught.value.errors
    assert error.path == path and fragment in str(error)
    assert str(caught.value).startswith("old.yaml: 1 error(s)")


# --- what cannot be converted ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "path", "fragment"),
    [
        (
            {**tf_job(), "apiVersion": "kubeflow.org/v1alpha2"},
            "apiVersion",
            "kubeflow.org/v1, or an older version kubetrain converts: kubeflow.org/v1beta1",
        ),
        ({**mpi_job(), "apiVersion": "kubeflow.org/v1beta1"}, "apiVersion", "v1alpha1"),
        ({**tf_job(), "kind": "NoSuchJob"}, "kind", "must be one of: PyTorchJob, TFJob"),
        ({**tf_job(), "apiVersion": "kubeflow.org/v1beta1", "spec": "x"}, "spec", "mapping"),
        (["not", "a", "job"], "", "a mapping"),
    ],
    ids=["unknown-version", "wrong-kind-version", "unknown-kind", "spec-not-a-mapping", "a-list"],
)
def test_rejects_what_it_cannot_convert(document: Any, path: str, fragment: str) -> None:
    with pytest.raises(JobValidationError) as caught:
        convert(document)
    assert any(e.path == path and fragment in str(e) for e in caught.value.errors), str(
        caught.value
    )


def test_current_versions_pass_through_unchanged() -> None:
    for document in (tf_job(), pytorch_job(), mpi_job()):
        conv = convert(document)
        assert conv.output == document and conv.complete
        assert [n.kind for n in conv.notes] == [NoteKind.CARRIED]


def test_rejects_a_target_that_does_not_fit_the_kind() -> None:
    with pytest.raises(JobValidationError, match="a TFJob converts to v1"):
        convert(tf_job(), to="v2beta1")
    with pytest.raises(ValueError, match="must be one of: v1, v2beta1, trainjob"):
        convert(tf_job(), to="v3")
    with pytest.raises(ValueError, match="runtime"):
        convert(tf_job(), runtime="torch-distributed")


def test_loader_refusal_names_the_convert_command() -> None:
    with pytest.raises(JobValidationError) as caught:
        load_job({**tf_job(), "apiVersion": "kubeflow.org/v1beta2"})
    assert "`kubetrain convert FILE` converts it" in str(caught.value)
    with pytest.raises(JobValidationError) as caught:
        load_job({**tf_job(), "apiVersion": "kubeflow.org/v2"})
    assert "kubetrain convert" not in str(caught.value)


# --- round trips: a served job written back in an older shape converts to itself ---------------

_policy = st.sampled_from(["All", "Running", "None"])
_count = st.integers(0, 10**6)


def _replica_specs(types: list[str], container: str) -> st.SearchStrategy[dict[str, Any]]:
    one = st.fixed_dictionaries(
        {"replicas": st.integers(1, 16), "template": st.just(template(container))},
        optional={"restartPolicy": st.sampled_from(["OnFailure", "Never", "ExitCode"])},
    )
    return st.fixed_dictionaries({t: one for t in types})


@st.composite
def _tf_pytorch(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a served TFJob or PyTorchJob, the same job as v1beta1 or v1beta2)."""
    version = draw(st.sampled_from(["v1beta1", "v1beta2"]))
    keys = ["ttlSecondsAfterFinished"]
    keys += ["activeDeadlineSeconds", "backoffLimit"] if version == "v1beta2" else []
    run_policy: dict[str, Any] = {"cleanPodPolicy": draw(_policy)}
    run_policy |= {k: draw(_count) for k in draw(st.lists(st.sampled_from(keys), unique=True))}
    if draw(st.booleans()):
        job = tf_job(runPolicy=run_policy)
        job["spec"]["tfReplicaSpecs"] = draw(_replica_specs(["PS", "Worker"], "tensorflow"))
    else:
        job = pytorch_job(runPolicy=run_policy)
        job["spec"]["pytorchReplicaSpecs"] = draw(_replica_specs(["Worker"], "pytorch"))
    old = copy.deepcopy(job)
    old["apiVersion"] = f"kubeflow.org/{version}"
    old["spec"].update(old["spec"].pop("runPolicy"))
    return job, old


@st.composite
def _mpi(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a served MPIJob, the same job as v1alpha2 or v1)."""
    version = draw(st.sampled_from(["v1alpha2", "v1"]))
    run_policy: dict[str, Any] = {"cleanPodPolicy": draw(_policy)}
    run_policy |= {
        k: draw(_count)
        for k in draw(st.lists(st.sampled_from(["backoffLimit", "activeDeadlineSeconds"])))
    }
    job = mpi_job(slotsPerWorker=draw(st.integers(1, 8)), runPolicy=run_policy)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = draw(st.integers(1, 32))
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = draw(
        st.sampled_from(["Never", "OnFailure"])
    )
    old = copy.deepcopy(job)
    old["apiVersion"] = f"kubeflow.org/{version}"
    old_policy = old["spec"].pop("runPolicy")
    old["spec"]["cleanPodPolicy"] = old_policy.pop("cleanPodPolicy")
    if version == "v1alpha2" and draw(st.booleans()):
        old["spec"].update(old_policy)  # v1alpha2 also had them at the top
    elif old_policy:
        old["spec"]["runPolicy"] = old_policy
    if version == "v1alpha2":
        implementation = draw(st.sampled_from(["OpenMPI", "Intel", "MPICH", None]))
        if implementation:
            job["spec"]["mpiImplementation"] = implementation
            old["spec"]["mpiDistribution"] = implementation.replace("Intel", "IntelMPI")
    return job, old


@st.composite
def _mpi_v1alpha1(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a served MPIJob of v1alpha1's shape, the same job as v1alpha1)."""
    workers, per_worker = draw(st.integers(1, 16)), draw(st.sampled_from([1, 2, 4, 8]))
    launcher = template("horovod")
    launcher["spec"]["containers"][0]["command"] = ["mpirun", "./app"]
    worker = template("horovod")
    worker["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": per_worker}}
    job = mpi_job(slotsPerWorker=per_worker, runPolicy={"cleanPodPolicy": "Running"})
    job["spec"]["mpiReplicaSpecs"] = {
        "Launcher": {"replicas": 1, "template": launcher},
        "Worker": {"replicas": workers, "template": worker},
    }
    pod = copy.deepcopy(worker)
    pod["spec"]["containers"][0]["command"] = ["mpirun", "./app"]
    spec: dict[str, Any] = {"template": pod}
    if draw(st.booleans()):
        spec |= {"gpus": workers * per_worker, "gpusPerNode": per_worker}
    else:
        spec["replicas"] = workers
    if draw(st.booleans()):
        spec["backoffLimit"] = job["spec"]["runPolicy"]["backoffLimit"] = draw(_count)
    return job, {"apiVersion": "kubeflow.org/v1alpha1", "kind": "MPIJob", **_meta(), "spec": spec}


def _meta() -> dict[str, Any]:
    return {"metadata": {"name": "job"}}


@settings(max_examples=80, deadline=None)
@given(st.one_of(_tf_pytorch(), _mpi(), _mpi_v1alpha1()))
def test_a_served_job_written_in_an_older_shape_converts_back_to_itself(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    job, old = pair
    conv = convert(old)
    assert conv.complete, [n.line() for n in conv.notes]
    assert load_job(conv.output) == load_job(job)
