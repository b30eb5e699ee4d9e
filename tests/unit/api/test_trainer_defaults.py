"""The Trainer v2 defaulting step fills in what upstream v2.3.0's CRDs would store, and
nothing else; the defaulted objects still pass every rule."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.trainer import load_trainer_object
from kubetrain.api.trainer.defaults import apply_trainer_defaults
from kubetrain.api.trainer.runtime import RuntimeBase
from tests.builders.jobs import set_path
from tests.builders.trainer import rjob, runtime, sdk_bodies, trainjob, upstream_documents


def test_trainjob_defaults_are_upstreams() -> None:
    job = apply_trainer_defaults(load_trainer_object(trainjob()))
    assert job.to_wire()["spec"] == {
        "runtimeRef": {
            "name": "torch-distributed",
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
        },
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }


def test_trainjob_values_win() -> None:
    wire = trainjob(
        runtimeRef={"name": "mine", "kind": "TrainingRuntime"},
        suspend=True,
        managedBy="kueue.x-k8s.io/multikueue",
    )
    spec = apply_trainer_defaults(load_trainer_object(wire)).to_wire()["spec"]
    assert spec["runtimeRef"]["kind"] == "TrainingRuntime"
    assert (spec["suspend"], spec["managedBy"]) == (True, "kueue.x-k8s.io/multikueue")


def test_runtime_defaults_are_upstreams() -> None:
    wire = runtime(
        rjobs=[rjob(), rjob("aux", step=None, replicas=3)],
        mlPolicy={"mpi": {"mpiImplementation": ""}},
        podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 0}},
    )
    wire["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 2}
    wire["spec"]["template"]["spec"]["volumeClaimPolicies"] = [{"retentionPolicy": {}}]
    spec = apply_trainer_defaults(load_trainer_object(wire)).to_wire()["spec"]
    assert spec["mlPolicy"] == {
        "numNodes": 1,
        "mpi": {
            "numProcPerNode": 1,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/root/.ssh",
            "runLauncherAsNode": False,
        },
    }
    assert spec["podGroupPolicy"] == {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    jobs = spec["template"]["spec"]["replicatedJobs"]
    assert [(j["replicas"], j["groupName"]) for j in jobs] == [(1, "default"), (3, "default")]
    assert spec["template"]["spec"]["failurePolicy"]["restartStrategy"] == "Recreate"
    assert spec["template"]["spec"]["volumeClaimPolicies"] == [
        {"retentionPolicy": {"whenDeleted": "Delete"}}
    ]


@pytest.mark.parametrize(
    "policy",
    [{"flux": {}}, {"torch": {}}, {"jax": {}}],
    ids=["flux", "torch", "jax"],
)
def test_framework_defaults(policy: dict[str, Any]) -> None:
    wire = set_path(runtime(), "spec.mlPolicy", policy)
    spec = apply_trainer_defaults(load_trainer_object(wire)).to_wire()["spec"]
    expected = {"numNodes": 1, **policy}
    if "flux" in policy:
        expected["flux"] = {"numProcPerNode": 1}
    assert spec["mlPolicy"] == expected


def test_defaulting_is_a_copy_and_is_idempotent() -> None:
    loaded = load_trainer_object(runtime())
    once = apply_trainer_defaults(loaded)
    assert loaded.to_wire() == runtime()
    assert apply_trainer_defaults(once) == once


def test_defaulted_objects_still_pass_every_rule() -> None:
    objects = [doc for _, doc in upstream_documents()] + list(sdk_bodies().values())
    for obj in objects:
        defaulted = apply_trainer_defaults(load_trainer_object(obj))
        assert load_trainer_object(defaulted.to_wire()) == defaulted


@pytest.mark.parametrize(
    ("policy", "nodes"),
    [
        ({"torch": {"elasticPolicy": {"minNodes": 2, "maxNodes": 4}}}, 2),
        ({"numNodes": 3, "torch": {"elasticPolicy": {"minNodes": 2, "maxNodes": 4}}}, 3),
        ({"torch": {}}, 1),
    ],
    ids=["elastic-without-numNodes", "elastic-with-numNodes", "fixed"],
)
def test_a_runtimes_node_count_is_its_numnodes_else_elastic_min_nodes_else_1(
    policy: dict[str, Any], nodes: int
) -> None:
    defaulted = apply_trainer_defaults(
        load_trainer_object(set_path(runtime(), "spec.mlPolicy", policy))
    )
    assert isinstance(defaulted, RuntimeBase) and defaulted.spec.ml_policy is not None
    assert defaulted.spec.ml_policy.num_nodes == nodes
    # The defaulted runtime keeps to its own rules (numNodes within minNodes..maxNodes).
    assert load_trainer_object(defaulted.to_wire()) == defaulted
