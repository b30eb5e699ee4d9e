"""The Trainer v2 models and loader: upstream v2.3.0's manifests, the Kubeflow SDK's own
TrainJobs and kubetrain's examples load and serialize back unchanged; what the API server
refuses is refused with its path; quantities are read as the server reads them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError as PydanticValidationError

from kubetrain.api import JobValidationError, PyTorchJob, TFJob
from kubetrain.api.trainer import (
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJob,
    load_object,
    load_object_file,
    load_objects_from_yaml,
    load_trainer_object,
)
from kubetrain.api.trainer.sdk import runtime_notes, sdk_reads_limits, trainjob_notes
from kubetrain.api.trainer.trainjob import TrainJobStatus
from tests.conftest import EXAMPLES
from tests.unit.api.helpers import example, set_path
from tests.unit.api.trainer_helpers import (
    rjob,
    runtime,
    sdk_bodies,
    trainer_examples,
    trainjob,
    upstream_documents,
)

UPSTREAM = upstream_documents()
SDK = sdk_bodies()


def _errors(obj: Any) -> list[str]:
    with pytest.raises(JobValidationError) as caught:
        load_trainer_object(obj)
    return [str(e) for e in caught.value.errors]


# --- what users send loads, and serializes back unchanged ---------------------------------------


def test_upstream_manifests_cover_every_kind_and_runtime() -> None:
    kinds = {doc["kind"] for _, doc in UPSTREAM}
    assert kinds == {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"}
    names = {doc["metadata"]["name"] for _, doc in UPSTREAM if doc["kind"] != "TrainJob"}
    assert names >= {
        "torch-distributed",
        "deepspeed-distributed",
        "mlx-distributed",
        "jax-distributed",
        "xgboost-distributed",
        "torchtune-llama3.2-1b",
        "torch-distributed-with-cache",
        "flux-distributed",
    }


@pytest.mark.parametrize(("name", "doc"), UPSTREAM, ids=[name for name, _ in UPSTREAM])
def test_upstream_manifest_round_trips(name: str, doc: dict[str, Any]) -> None:
    loaded = load_trainer_object(doc, name)
    assert loaded.to_wire() == doc
    assert load_trainer_object(loaded.to_wire()) == loaded


@pytest.mark.parametrize("call", SDK, ids=list(SDK))
def test_the_sdks_trainjobs_round_trip(call: str) -> None:
    body = SDK[call]
    job = load_trainer_object(body, call)
    assert isinstance(job, TrainJob)
    assert job.to_wire() == body
    assert trainjob_notes(job) == []


def test_sdk_bodies_are_the_three_calls_of_the_issue_and_more() -> None:
    assert set(SDK) >= {"gpu-4", "nodes-4-gpu-2", "runtime-nodes-2", "initializers", "options"}
    four = load_trainer_object(SDK["nodes-4-gpu-2"])
    assert isinstance(four, TrainJob) and four.spec.trainer is not None
    assert four.spec.trainer.num_nodes == 4
    # The SDK sends quantities as JSON floats; they are kept as sent.
    assert four.spec.trainer.resources_per_node == {
        "limits": {"nvidia.com/gpu": 2.0},
        "requests": {"nvidia.com/gpu": 2.0},
    }
    assert four.spec.runtime_ref.api_group is None  # the SDK sends no apiGroup
    options = load_trainer_object(SDK["options"])
    assert isinstance(options, TrainJob) and options.spec.runtime_patches
    assert options.spec.runtime_patches[0].manager == "trainer.kubeflow.org/kubeflow-sdk"
    assert options.spec.active_deadline_seconds == 3600


@pytest.mark.parametrize(
    ("name", "doc"), trainer_examples(), ids=[n for n, _ in trainer_examples()]
)
def test_examples_round_trip(name: str, doc: dict[str, Any]) -> None:
    loaded = load_object_file(EXAMPLES / name)
    assert loaded.to_wire() == doc
    if isinstance(loaded, ClusterTrainingRuntime):
        assert runtime_notes(loaded) == []


def test_deepspeed_runtime_has_the_documented_shape() -> None:
    doc = dict(UPSTREAM)["manifests/base/runtimes/deepspeed_distributed.yaml"]
    rt = load_trainer_object(doc)
    assert isinstance(rt, ClusterTrainingRuntime)
    assert rt.spec.ml_policy is not None and rt.spec.ml_policy.framework() == "mpi"
    mpi = rt.spec.ml_policy.mpi
    assert mpi is not None and mpi.run_launcher_as_node is True
    assert mpi.ssh_auth_mount_path == "/home/mpiuser/.ssh"
    assert [r.name for r in rt.replicated_jobs()] == ["node", "launcher"]
    launcher = rt.replicated_jobs()[1]
    assert launcher.depends_on is not None and launcher.depends_on[0].status == "Ready"
    assert rt.spec.template.spec.success_policy is not None


def test_status_round_trips() -> None:
    wire = trainjob(trainer={"numNodes": 2})
    wire["status"] = {
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "reason": "JobsCompleted",
                "message": "all 2 nodes succeeded",
                "lastTransitionTime": "2026-11-22T10:00:00Z",
            }
        ],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ],
        "trainerStatus": {
            "progressPercentage": 100,
            "metrics": [{"name": "loss", "value": "0.12"}],
            "lastUpdatedTime": "2026-11-22T09:59:00Z",
        },
        "nodes": 2,
        "readyNodes": 0,
        "restarts": 1,
        "startTime": "2026-11-22T09:00:00Z",
        "completionTime": "2026-11-22T10:00:00Z",
    }
    assert load_trainer_object(wire).to_wire() == wire


# --- quantities: as the API server reads resourcesPerNode (a core ResourceRequirements) -----------


@pytest.mark.parametrize("value", [2, 2.0, "2", "500m", "16Gi", "1e3", 4.0])
def test_accepts_quantities_the_server_accepts(value: Any) -> None:
    job = trainjob(trainer={"resourcesPerNode": {"limits": {"cpu": value}}})
    assert load_trainer_object(job).to_wire() == job


@pytest.mark.parametrize("value", [0.5, 1e20, -2.5, "2 cpus", True])
def test_rejects_quantities_the_server_rejects(value: Any) -> None:
    job = trainjob(trainer={"resourcesPerNode": {"limits": {"cpu": value}}})
    (error,) = _errors(job)
    assert error.startswith("spec.trainer.resourcesPerNode.limits.cpu: ")


# --- refusals, each with its path-----------------------------------------------------------


REJECTED: list[tuple[str, dict[str, Any], str]] = [
    (
        "snake-case",
        set_path(trainjob(), "spec.runtime_ref", {"name": "x"}),
        "spec.runtime_ref: unknown field: did you mean 'runtimeRef'?",
    ),
    (
        "unknown-trainer-field",
        trainjob(trainer={"numProcsPerNode": 2}),
        "spec.trainer.numProcsPerNode: unknown field: did you mean 'numProcPerNode'?",
    ),
    ("no-runtime-ref", set_path(trainjob(), "spec", {}), "spec.runtimeRef: is required"),
    (
        "zero-nodes",
        trainjob(trainer={"numNodes": 0}),
        "spec.trainer.numNodes: 0 is invalid: must be >= 1",
    ),
    (
        "float-nodes",
        trainjob(trainer={"numNodes": 2.0}),
        "spec.trainer.numNodes: 2.0 is invalid: must be an integer",
    ),
    (
        "zero-procs",
        trainjob(trainer={"numProcPerNode": 0}),
        "spec.trainer.numProcPerNode: 0 is invalid: must be >= 1",
    ),
    (
        "deadline-zero",
        trainjob(activeDeadlineSeconds=0),
        "spec.activeDeadlineSeconds: 0 is invalid: must be >= 1",
    ),
    (
        "duplicate-env",
        trainjob(trainer={"env": [{"name": "A", "value": "1"}, {"name": "A"}]}),
        'spec.trainer.env[1]: is invalid: duplicate entry: item 0 already has name "A"',
    ),
    (
        "env-without-name",
        trainjob(trainer={"env": [{"value": "1"}]}),
        "spec.trainer.env[0].name: is required",
    ),
    (
        "duplicate-managers",
        trainjob(runtimePatches=[{"manager": "a.io/x"}, {"manager": "a.io/x"}]),
        'spec.runtimePatches[1]: is invalid: duplicate entry: item 0 already has manager "a.io/x"',
    ),
    (
        "bad-runtime-ref-name",
        trainjob(runtimeRef={"name": "Torch Distributed"}),
        'spec.runtimeRef.name: "Torch Distributed" is invalid: must match',
    ),
    (
        "name-not-dns-1035",
        trainjob("1job"),
        'metadata.name: "1job" is invalid: must match',
    ),
    (
        "patch-pod-typo",
        trainjob(
            runtimePatches=[
                {
                    "manager": "a.io/x",
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {"template": {"spec": {"nodeSelektor": {}}}}
                                        },
                                    }
                                ]
                            }
                        }
                    },
                }
            ]
        ),
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template."
        "spec.template.spec.nodeSelektor: unknown field: did you mean 'nodeSelector'?",
    ),
    (
        "runtime-pod-typo",
        set_path(
            runtime(),
            "spec.template.spec.replicatedJobs[0].template.spec.template.spec.contianers",
            [],
        ),
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.contianers: unknown "
        "field: did you mean 'containers'?",
    ),
    (
        "runtime-duplicate-jobs",
        runtime(rjobs=[rjob(), rjob()]),
        "spec.template.spec.replicatedJobs[1]: is invalid: duplicate entry: item 0 already has "
        'name "node"',
    ),
    (
        "runtime-no-jobs",
        runtime(rjobs=[]),
        "spec.template.spec.replicatedJobs: [] is invalid: must have at least 1 item(s), found 0",
    ),
    (
        "runtime-no-template",
        set_path(runtime(), "spec", {"mlPolicy": {"torch": {}}}),
        "spec.template: is required",
    ),
    (
        "runtime-unknown-framework",
        set_path(runtime(), "spec.mlPolicy", {"paddle": {}}),
        "spec.mlPolicy.paddle: unknown field",
    ),
    (
        "runtime-mpi-implementation",
        set_path(runtime(), "spec.mlPolicy", {"mpi": {"mpiImplementation": "Intel"}}),
        'spec.mlPolicy.mpi.mpiImplementation: "Intel" is invalid',
    ),
    (
        "runtime-name",
        set_path(runtime(), "metadata.name", "Torch_Runtime"),
        'metadata.name: "Torch_Runtime" is invalid: must match',
    ),
    (
        "jax-takes-no-settings",
        set_path(runtime(), "spec.mlPolicy", {"jax": {"processes": 2}}),
        "spec.mlPolicy.jax.processes: unknown field",
    ),
    (
        "wrong-api-version",
        set_path(trainjob(), "apiVersion", "trainer.kubeflow.org/v1"),
        'apiVersion: "trainer.kubeflow.org/v1" is invalid: must be trainer.kubeflow.org/v1alpha1',
    ),
]

#: Statuses the CRD's status schema refuses (on a /status write), each with the error.
UNREADABLE_STATUSES = [
    (
        "jobs-status-incomplete",
        {"jobsStatus": [{"name": "node", "ready": 1}]},
        "jobsStatus.0.active",
    ),
    (
        "condition-without-time",
        {"conditions": [{"type": "Complete", "status": "True", "reason": "R", "message": ""}]},
        "conditions.0.lastTransitionTime",
    ),
]


@pytest.mark.parametrize(
    ("status", "problem"),
    [(s, p) for _, s, p in UNREADABLE_STATUSES],
    ids=[i for i, _, _ in UNREADABLE_STATUSES],
)
def test_ignores_a_submitted_status_it_cannot_read_as_the_server_does(
    status: dict[str, Any], problem: str
) -> None:
    # The status model refuses it (what a /status write of it would get) ...
    with pytest.raises(PydanticValidationError, match=problem.replace(".", r"\.")):
        TrainJobStatus.model_validate(status, by_alias=True, by_name=False)
    # ... but a TrainJob submitted with it is admitted without it (the status subresource).
    loaded = load_trainer_object(set_path(trainjob(), "status", status))
    assert isinstance(loaded, TrainJob) and loaded.status is None


@pytest.mark.parametrize(
    ("obj", "expected"), [(o, e) for _, o, e in REJECTED], ids=[i for i, _, _ in REJECTED]
)
def test_rejects_with_path(obj: dict[str, Any], expected: str) -> None:
    errors = _errors(obj)
    assert any(e.startswith(expected) for e in errors), (expected, errors)


def test_rejects_a_sixth_replicated_job() -> None:
    (error,) = _errors(runtime(rjobs=[rjob(f"j{i}", step=None) for i in range(6)]))
    assert error.startswith("spec.template.spec.replicatedJobs: ")
    assert error.endswith("is invalid: must have at most 5 item(s), found 6")


def test_runtime_names_may_have_dots_but_trainjob_names_may_not() -> None:
    assert load_trainer_object(set_path(runtime(), "metadata.name", "torchtune-llama3.2-1b"))
    assert any("metadata.name" in e for e in _errors(trainjob("llama3.2")))


def test_explicit_nulls_the_server_prunes_are_unset() -> None:
    job = trainjob(trainer={"numNodes": 2, "image": None}, suspend=None)
    assert load_trainer_object(job).to_wire() == trainjob(trainer={"numNodes": 2})


# --- any kind ----------------------------------------------------------------------------------


def test_load_object_takes_every_kind() -> None:
    assert isinstance(load_object(example("pytorchjob.yaml")), PyTorchJob)
    assert isinstance(load_object(trainjob()), TrainJob)
    assert isinstance(load_object(runtime(kind="TrainingRuntime")), TrainingRuntime)
    assert isinstance(load_object(runtime()), ClusterTrainingRuntime)


@pytest.mark.parametrize("kind", ["JobSet", None, 3])
def test_load_object_names_every_kind_when_the_kind_is_wrong(kind: Any) -> None:
    obj = set_path(trainjob(), "kind", kind)
    if kind is None:
        del obj["kind"]
    with pytest.raises(JobValidationError) as caught:
        load_object(obj)
    assert "kind" in str(caught.value)
    if kind != 3:
        assert (
            "PyTorchJob, TFJob, MPIJob, XGBoostJob, TrainJob, TrainingRuntime, "
            "ClusterTrainingRuntime" in str(caught.value)
        )


def test_yaml_stream_mixes_kinds_and_reports_each_document() -> None:
    text = (EXAMPLES / "trainjob.yaml").read_text() + "---\n"
    text += (EXAMPLES / "tfjob.yaml").read_text() + "---\n"
    text += "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
    results = dict(load_objects_from_yaml(text, "stream.yaml"))
    assert isinstance(results[0], TrainJob)
    assert isinstance(results[1], TFJob)
    assert isinstance(results[2], JobValidationError)
    assert "stream.yaml document 3" in str(results[2]) and "spec: is required" in str(results[2])


# --- what the Kubeflow SDK needs, as notes -------------------------------------------------------


def test_notes_what_the_sdk_cannot_read() -> None:
    memory_only = load_trainer_object(
        trainjob(trainer={"resourcesPerNode": {"limits": {"memory": "8Gi"}}})
    )
    assert isinstance(memory_only, TrainJob)
    (note,) = trainjob_notes(memory_only)
    assert "kubeflow/sdk#516" in note
    bare = runtime(rjobs=[rjob(step=None)])
    del bare["metadata"]["labels"]
    del bare["spec"]["mlPolicy"]
    loaded = load_trainer_object(bare)
    assert isinstance(loaded, ClusterTrainingRuntime)
    notes = runtime_notes(loaded)
    assert len(notes) == 3 and "framework label" in notes[0] and "mlPolicy" in notes[1]
    assert "'node' container" in notes[2]


@pytest.mark.parametrize(
    ("limits", "readable"),
    [
        (None, True),
        ({}, True),
        ({"cpu": 2}, True),
        ({"nvidia.com/gpu": 8, "rdma/ib": 1}, True),
        ({"nvidia.com/mig-1g.10gb": 1}, True),
        ({"memory": "8Gi"}, False),
        ({"vpc.amazonaws.com/efa": 4}, False),
    ],
)
def test_sdk_device_keys(limits: dict[str, Any] | None, readable: bool) -> None:
    assert sdk_reads_limits(limits) is readable


def test_upstream_runtimes_are_usable_by_the_sdk() -> None:
    for name, doc in UPSTREAM:
        loaded = load_trainer_object(doc)
        if not isinstance(loaded, TrainJob):
            assert runtime_notes(loaded) == [], name


# --- generated objects----------------------------------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9]{0,20}", fullmatch=True)
_env = st.lists(
    st.fixed_dictionaries(
        {"name": st.from_regex(r"[A-Z][A-Z_]{0,8}", fullmatch=True), "value": st.text(max_size=8)}
    ),
    max_size=4,
    unique_by=lambda e: e["name"],
).filter(lambda env: not any(e["name"].startswith(("PET_", "DMLC_", "OMPI_")) for e in env))
_trainer = st.fixed_dictionaries(
    {},
    optional={
        "image": _names,
        "command": st.lists(st.text(max_size=20), max_size=3),
        "args": st.lists(st.text(max_size=20), max_size=3),
        "env": _env,
        "numNodes": st.integers(1, 1000),
        "numProcPerNode": st.integers(1, 64),
        "resourcesPerNode": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                    st.one_of(st.integers(0, 64), st.sampled_from(["500m", "16Gi", 2.0, 8.0])),
                )
            },
        ),
    },
)


@st.composite
def _trainjobs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "runtimeRef": draw(
            st.fixed_dictionaries(
                {"name": _names},
                optional={"kind": st.sampled_from(["ClusterTrainingRuntime", "TrainingRuntime"])},
            )
        ),
        **draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "trainer": _trainer,
                    "suspend": st.booleans(),
                    "activeDeadlineSeconds": st.integers(1, 10**9),
                    "managedBy": st.sampled_from(
                        ["trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"]
                    ),
                    "initializer": st.fixed_dictionaries(
                        {},
                        optional={
                            "dataset": st.fixed_dictionaries(
                                {},
                                optional={
                                    "storageUri": st.sampled_from(["", "hf://a/b", "s3://x"])
                                },
                            )
                        },
                    ),
                },
            )
        ),
    }
    return trainjob(draw(st.from_regex(r"[a-z][a-z0-9-]{0,30}[a-z0-9]", fullmatch=True)), **spec)


@settings(max_examples=80, deadline=None)
@given(_trainjobs())
def test_generated_trainjobs_round_trip(wire: dict[str, Any]) -> None:
    assert load_trainer_object(wire).to_wire() == wire
