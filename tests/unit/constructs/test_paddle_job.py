"""PaddleJob construct: collective mode (Workers only) or parameter servers (Masters)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import PaddleJob as PaddleJobModel
from kubetrain.api import apply_defaults, load_job
from kubetrain.constructs import PaddleJob, PaddleJobProps, Resources
from kubetrain.frameworks import ClusterAddressing, paddle
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, new_chart, synth


def build(**props: Any) -> dict[str, Any]:
    (obj,) = synth(lambda chart: PaddleJob(chart, "Ocr", PaddleJobProps(image=TRAINER, **props)))
    return obj


def test_collective_mode_runs_workers_only() -> None:
    obj = build(workers=2, gpus_per_node=8, args=("--epochs", "3"))
    assert obj["apiVersion"] == "kubeflow.org/v1" and obj["kind"] == "PaddleJob"
    (worker,) = obj["spec"]["paddleReplicaSpecs"].values()
    assert set(obj["spec"]["paddleReplicaSpecs"]) == {"Worker"}
    assert worker["replicas"] == 2 and worker["restartPolicy"] == "OnFailure"
    (container,) = worker["template"]["spec"]["containers"]
    assert container["name"] == "paddle"
    assert container["args"] == ["--epochs", "3"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert_valid([obj])


def test_parameter_servers_are_masters_without_gpus() -> None:
    obj = build(masters=2, workers=3, gpus_per_node=4)
    specs = obj["spec"]["paddleReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 2, "Worker": 3}
    assert "resources" not in specs["Master"]["template"]["spec"]["containers"][0]
    assert specs["Worker"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": 4}
    }
    assert_valid([obj])


def test_nodes_is_what_the_operator_injects() -> None:
    construct = PaddleJob(new_chart(), "Ocr", PaddleJobProps(image=TRAINER, masters=1, workers=3))
    job = apply_defaults(load_job(construct.job.to_wire()))
    assert isinstance(job, PaddleJobModel)
    env = {
        e["name"]: e["value"]
        for e in paddle.replica_env(job, "Worker", 0, ClusterAddressing())
        if "value" in e
    }
    assert construct.nodes == int(env["PADDLE_NNODES"]) == 4
    assert env["PADDLE_TRAINER_NUM"] == "1"


def test_fails_when_the_escape_hatch_renames_the_main_container() -> None:
    def patch(replica_type: str, template: dict[str, Any]) -> dict[str, Any]:
        template["spec"]["containers"][0]["name"] = "trainer"
        return template

    with pytest.raises(ValueError) as caught:
        build(workers=1, patch_pod_template=patch)
    message = str(caught.value)
    assert "test/Ocr" in message and "spec.paddleReplicaSpecs.Worker.template" in message
    assert 'must have at least one container with name "paddle"' in message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"workers": 0}, "workers (0) must be >= 1"),
        ({"masters": 2, "workers": 0}, "workers (0) must be >= 1"),
        ({"masters": -1}, "masters (-1) must be >= 0"),
        ({"restart_policy": "Sometimes"}, "restart_policy ('Sometimes') must be one of"),
        ({"resources": Resources(gpus=2)}, "resources.gpus (2) must not be set on a job"),
    ],
    ids=[
        "no-workers",
        "servers-without-trainers",
        "negative-masters",
        "bad-restart-policy",
        "gpus-in-resources",
    ],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        PaddleJobProps(image=TRAINER, **props)
    assert message in str(caught.value)
