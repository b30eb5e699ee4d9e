"""``queue=`` and ``workload_priority_class=`` on the job constructs (Kueue's labels on the
job object, not its pods), and ``queue=`` on the runtimes: an admission policy that
refuses TrainJobs of the runtime without the queue label."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from kubetrain.api import keys as K
from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.queues import (
    ClusterQueue,
    ClusterQueueProps,
    FlavorQuota,
    LocalQueue,
    LocalQueueProps,
    Quota,
    ResourceFlavor,
    ResourceFlavorProps,
)
from kubetrain.constructs.runtimes import RuntimeProps, TorchRuntime
from kubetrain.constructs.tf_job import TFJob, TFJobProps
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, synth

QUEUE = K.KUEUE_QUEUE_NAME_LABEL
PRIORITY = K.KUEUE_PRIORITY_CLASS_LABEL


def local_queue(namespace: str = "team-a") -> LocalQueue:
    scope = cdk8s.Chart(cdk8s.App(), "queues")
    flavor = ResourceFlavor(scope, "F", ResourceFlavorProps(name="cpu"))
    cluster_queue = ClusterQueue(
        scope,
        "Q",
        ClusterQueueProps(name="team", quotas=(FlavorQuota(flavor=flavor, cpu=Quota.of(8)),)),
    )
    return LocalQueue(
        scope, "L", LocalQueueProps(namespace=namespace, cluster_queue=cluster_queue, name="gpu")
    )


def pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    return [spec["template"] for spec in specs.values()]


@pytest.mark.parametrize(
    "build",
    [
        lambda chart, kw: PyTorchJob(chart, "Job", PyTorchJobProps(image=TRAINER, **kw)),
        lambda chart, kw: TFJob(chart, "Job", TFJobProps(image=TRAINER, **kw)),
        lambda chart, kw: MPIJob(
            chart, "Job", MPIJobProps(image=TRAINER, command=("python", "train.py"), **kw)
        ),
    ],
    ids=["pytorchjob", "tfjob", "mpijob"],
)
def test_queued_job_carries_kueues_labels_on_the_job_only(build: Any) -> None:
    props = {
        "namespace": "team-a",
        "queue": local_queue(),
        "workload_priority_class": "high",
        "labels": {"app": "llm"},
    }
    (job,) = [o for o in synth(lambda chart: build(chart, props)) if o["kind"].endswith("Job")]
    assert job["metadata"]["labels"] == {"app": "llm", QUEUE: "gpu", PRIORITY: "high"}
    for template in pods(job):
        labels = template["metadata"].get("labels", {})
        assert QUEUE not in labels and PRIORITY not in labels, labels
    assert_valid([job])


def test_job_queue_by_name() -> None:
    (job,) = synth(lambda c: PyTorchJob(c, "Job", PyTorchJobProps(image=TRAINER, queue="default")))
    assert job["metadata"]["labels"] == {QUEUE: "default"}


def test_unqueued_job_has_no_kueue_label() -> None:
    (job,) = synth(lambda c: PyTorchJob(c, "Job", PyTorchJobProps(image=TRAINER)))
    assert "labels" not in job["metadata"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"queue": "__"},
            f"queue[{QUEUE!r}] ('__') must be a label value",
        ),
        ({"queue": ""}, "queue ('') must name a Kueue object, or be None"),
        (
            {"labels": {QUEUE: "gpu"}},
            f"labels['{QUEUE}'] ('gpu') is set by hand: use queue=",
        ),
        (
            {"labels": {PRIORITY: "high"}},
            f"labels['{PRIORITY}'] ('high') is set by hand: use workload_priority_class=",
        ),
    ],
    ids=["bad-name", "empty", "queue-label-by-hand", "priority-label-by-hand"],
)
def test_rejects_bad_queue_props(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        PyTorchJobProps(image=TRAINER, **kwargs)
    assert message in str(caught.value)


def test_rejects_a_local_queue_of_another_namespace() -> None:
    with pytest.raises(ValueError) as caught:
        PyTorchJobProps(image=TRAINER, namespace="team-b", queue=local_queue("team-a"))
    assert str(caught.value) == (
        "queue ('gpu') is a LocalQueue of namespace 'team-a', but the job runs in 'team-b': "
        "a job can only use a LocalQueue of its own namespace"
    )


# Runtimes -----------------------------------------------------------------------------


def runtime_objects(**kwargs: Any) -> dict[str, dict[str, Any]]:
    objs = synth(lambda c: TorchRuntime(c, "torch-gpu", RuntimeProps(image=TRAINER, **kwargs)))
    return {o["kind"]: o for o in objs}


def test_queued_cluster_runtime_refuses_trainjobs_without_the_queue_label() -> None:
    objs = runtime_objects(queue=local_queue("team-a"))
    runtime = objs["ClusterTrainingRuntime"]
    # Kueue never reads a runtime's labels: the runtime itself carries none of its own.
    assert QUEUE not in runtime["metadata"].get("labels", {})
    policy, binding = objs["ValidatingAdmissionPolicy"], objs["ValidatingAdmissionPolicyBinding"]
    name = "kubetrain-runtime-queue-torch-gpu"
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == name
    assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule == {
        "apiGroups": ["trainer.kubeflow.org"],
        "apiVersions": ["*"],
        "operations": ["CREATE"],
        "resources": ["trainjobs"],
    }
    (condition,) = spec["matchConditions"]
    assert "object.spec.runtimeRef.name == 'torch-gpu'" in condition["expression"]
    assert "'ClusterTrainingRuntime') == 'ClusterTrainingRuntime'" in condition["expression"]
    assert "request.namespace" not in condition["expression"]
    (validation,) = spec["validations"]
    assert f"object.metadata.labels['{QUEUE}'] == 'gpu'" in validation["expression"]
    assert f"add the label {QUEUE}=gpu" in validation["message"]
    assert "options=[Labels(" in validation["message"]
    assert_valid([policy, binding])


def test_queued_namespaced_runtime_matches_its_namespace_only() -> None:
    objs = runtime_objects(queue="default", cluster_scoped=False, namespace="team-a")
    policy = objs["ValidatingAdmissionPolicy"]
    assert policy["metadata"]["name"] == "kubetrain-runtime-queue-team-a-torch-gpu"
    (condition,) = policy["spec"]["matchConditions"]
    assert "== 'TrainingRuntime' && request.namespace == 'team-a'" in condition["expression"]
    (validation,) = policy["spec"]["validations"]
    assert "create a LocalQueue named default in the namespace" in validation["message"]


def test_unqueued_runtime_has_no_policy() -> None:
    assert sorted(runtime_objects()) == ["ClusterTrainingRuntime"]


def test_rejects_a_workload_priority_class_on_a_runtime() -> None:
    with pytest.raises(ValueError) as caught:
        RuntimeProps(image=TRAINER, workload_priority_class="high")
    assert f"Kueue reads it from each TrainJob's own label {PRIORITY}" in str(caught.value)


def test_namespaced_runtime_needs_a_local_queue_of_its_namespace() -> None:
    with pytest.raises(ValueError, match=r"a job can only use a LocalQueue of its own namespace"):
        RuntimeProps(image=TRAINER, cluster_scoped=False, namespace="b", queue=local_queue("a"))
