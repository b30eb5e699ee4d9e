"""TrainJob construct: a run of a runtime (by name and kind, or a runtime construct) with
the trainer's image, command, nodes and resources, checked by the typed Trainer API."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.trainer import TrainingRuntime, load_trainer_object
from kubetrain.api.trainer import TrainJob as TrainJobModel
from kubetrain.constructs import (
    Image,
    Quantity,
    Resources,
    RuntimeKind,
    RuntimeProps,
    TorchRuntime,
    TrainJob,
    TrainJobProps,
)
from kubetrain.frameworks import registry
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, new_chart, synth

SMOKE = ("python", "-c", "import torch.distributed as d; d.init_process_group('gloo')")


def build(**props: Any) -> dict[str, Any]:
    (obj,) = synth(lambda chart: TrainJob(chart, "Smoke", TrainJobProps(**props)))
    return obj


def test_a_smoke_test_of_a_cluster_runtime_by_name() -> None:
    obj = build(
        runtime="torch-distributed",
        image=TRAINER,
        command=SMOKE,
        num_nodes=2,
        resources_per_node=Resources(cpu=Quantity.of(1), cpu_limit=Quantity.of(1)),
        env={"NCCL_DEBUG": "INFO"},
        active_deadline_seconds=600,
    )
    assert obj == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "smoke", "namespace": "default"},
        "spec": {
            "activeDeadlineSeconds": 600,
            # The SDK's form: the kind stated, the group left to its default.
            "runtimeRef": {"kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
            "trainer": {
                "command": list(SMOKE),
                "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                "image": str(TRAINER),
                "numNodes": 2,
                "resourcesPerNode": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}},
            },
        },
    }
    assert isinstance(load_trainer_object(obj), TrainJobModel)
    assert_valid([obj])


def test_a_namespaced_runtime_by_name_gpus_and_a_queue() -> None:
    obj = build(
        runtime="torch-team",
        runtime_kind=RuntimeKind.TRAINING_RUNTIME,
        namespace="team-a",
        gpus_per_node=8,
        num_proc_per_node=8,
        queue="default",
        suspend=True,
    )
    assert obj["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"}
    assert obj["spec"]["runtimeRef"] == {"kind": "TrainingRuntime", "name": "torch-team"}
    assert obj["spec"]["trainer"] == {
        "numProcPerNode": 8,
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}},
    }
    assert obj["spec"]["suspend"] is True
    assert_valid([obj])


def test_a_runtime_construct_gives_its_name_kind_and_queue() -> None:
    chart = new_chart()
    runtime = TorchRuntime(
        chart,
        "torch-team",
        RuntimeProps(image=TRAINER, cluster_scoped=False, namespace="team-a", queue="gpu"),
    )
    job = TrainJob(chart, "Smoke", TrainJobProps(runtime=runtime, namespace="team-a", num_nodes=3))
    wire = job.trainjob.to_wire()
    assert wire["spec"]["runtimeRef"] == {"kind": "TrainingRuntime", "name": "torch-team"}
    # The runtime's admission policy refuses a TrainJob without its queue label.
    assert wire["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "gpu"}
    assert isinstance(runtime.runtime, TrainingRuntime)
    resolved = registry.resolve_trainjob(job.trainjob, runtime.runtime)
    assert resolved.spec.num_nodes == 3


def test_limits_the_sdk_cannot_read_get_a_cpu_limit_and_a_warning() -> None:
    resources = Resources(cpu=Quantity.of(2), memory=Quantity.gibibytes(4))
    with pytest.warns(RuntimeWarning, match="kubeflow/sdk#516"):
        obj = build(runtime="torch-distributed", resources_per_node=resources)
    assert obj["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"cpu": "2", "memory": "4Gi"}


@pytest.mark.parametrize(
    ("props", "fragments"),
    [
        (
            {"env": {"PET_NNODES": "4"}},
            ("spec.trainer.env[0].name", "must not set a variable the runtime's framework"),
        ),
        ({"num_nodes": 0}, ("spec.trainer.numNodes", "0")),
        ({"name": "a" * 60, "num_nodes": 100}, ("metadata.name", "TrainJob name too long")),
        ({"runtime": "Torch_Runtime"}, ("spec.runtimeRef.name", "Torch_Runtime")),
    ],
    ids=["reserved-env", "no-nodes", "name-too-long-for-its-pods", "bad-runtime-name"],
)
def test_fails_at_synth_on_what_the_api_refuses(
    props: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError) as caught:
        build(**{"runtime": "torch-distributed", **props})
    message = str(caught.value)
    assert message.startswith("test/Smoke: ")
    for fragment in fragments:
        assert fragment in message


def test_fails_when_a_namespaced_runtime_is_in_another_namespace() -> None:
    runtime = TorchRuntime(
        new_chart(), "torch", RuntimeProps(image=TRAINER, cluster_scoped=False, namespace="a")
    )
    with pytest.raises(ValueError) as caught:
        TrainJobProps(runtime=runtime, namespace="b")
    assert str(caught.value) == (
        "runtime ('torch') is a TrainingRuntime of namespace 'a', but the TrainJob runs in "
        "'b': a TrainJob can only use a TrainingRuntime of its own namespace, or a "
        "ClusterTrainingRuntime"
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"runtime_kind": RuntimeKind.TRAINING_RUNTIME},
            "runtime_kind (TrainingRuntime) contradicts runtime ('torch'), a "
            "ClusterTrainingRuntime: drop runtime_kind",
        ),
        (
            {"queue": "other"},
            "queue ('other') differs from runtime ('torch')'s queue 'gpu'",
        ),
    ],
    ids=["kind", "queue"],
)
def test_fails_when_props_contradict_the_runtime_construct(
    props: dict[str, Any], message: str
) -> None:
    runtime = TorchRuntime(new_chart(), "torch", RuntimeProps(image=TRAINER, queue="gpu"))
    with pytest.raises(ValueError) as caught:
        TrainJobProps(runtime=runtime, **props)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"gpus_per_node": -1}, "gpus_per_node (-1) must be >= 0"),
        (
            {"resources_per_node": Resources(gpus=2)},
            "resources_per_node.gpus (2) must not be set on a job: use gpus_per_node",
        ),
        ({"env": {"1BAD": "x"}}, "env key ('1BAD') is not a valid environment variable name"),
        ({"runtime": ""}, "runtime ('') must name a runtime"),
        ({"image": Image("ghcr.io/x/y:1"), "name": "Smoke_1"}, "name ('Smoke_1') must be"),
    ],
    ids=["negative-gpus", "gpus-in-resources", "bad-env-key", "no-runtime", "bad-name"],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        TrainJobProps(**{"runtime": "torch-distributed", **props})
    assert message in str(caught.value)
