"""XGBoostJob construct: one Master (the tracker, rank 0) and Workers, checked by the API."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import XGBoostJob as XGBoostJobModel
from kubetrain.api import apply_defaults, load_job
from kubetrain.constructs import Resources, XGBoostJob, XGBoostJobProps
from kubetrain.frameworks import ClusterAddressing, xgboost
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, new_chart, synth


def build(**props: Any) -> dict[str, Any]:
    (obj,) = synth(lambda chart: XGBoostJob(chart, "Xgb", XGBoostJobProps(image=TRAINER, **props)))
    return obj


def test_a_master_and_workers_on_gpus() -> None:
    obj = build(workers=3, gpus_per_node=1, command=("python", "-m", "train"))
    assert obj["apiVersion"] == "kubeflow.org/v1" and obj["kind"] == "XGBoostJob"
    assert obj["metadata"] == {"name": "xgb", "namespace": "default"}
    specs = obj["spec"]["xgbReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 3}
    # Upstream's default for both replica types, stated so the manifest says it.
    assert {v["restartPolicy"] for v in specs.values()} == {"Never"}
    for spec in specs.values():
        (container,) = spec["template"]["spec"]["containers"]
        assert container["name"] == "xgboost"
        assert container["command"] == ["python", "-m", "train"]
        assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert_valid([obj])


def test_world_size_is_what_the_operator_injects() -> None:
    construct = XGBoostJob(new_chart(), "Xgb", XGBoostJobProps(image=TRAINER, workers=2))
    job = apply_defaults(load_job(construct.job.to_wire()))
    assert isinstance(job, XGBoostJobModel)
    env = {
        e["name"]: e["value"] for e in xgboost.replica_env(job, "Worker", 1, ClusterAddressing())
    }
    assert construct.world_size == int(env["WORLD_SIZE"]) == 3
    assert env["RANK"] == "2"


def test_the_master_alone_trains() -> None:
    obj = build(workers=0)
    assert set(obj["spec"]["xgbReplicaSpecs"]) == {"Master"}


def test_fails_when_the_escape_hatch_renames_the_main_container() -> None:
    def patch(replica_type: str, template: dict[str, Any]) -> dict[str, Any]:
        template["spec"]["containers"][0]["name"] = "trainer"
        return template

    with pytest.raises(ValueError) as caught:
        build(workers=1, patch_pod_template=patch)
    message = str(caught.value)
    assert "test/Xgb" in message
    assert "spec.xgbReplicaSpecs.Worker.template" in message
    assert "must have at least one container with name xgboost" in message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"workers": -1}, "workers (-1) must be >= 0"),
        ({"restart_policy": "Sometimes"}, "restart_policy ('Sometimes') must be one of"),
        ({"resources": Resources(gpus=2)}, "resources.gpus (2) must not be set on a job"),
        ({"name": "Xgb_1"}, "name ('Xgb_1') must be a DNS-1035 label"),
    ],
    ids=["negative-workers", "bad-restart-policy", "gpus-in-resources", "bad-name"],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        XGBoostJobProps(image=TRAINER, **props)
    assert message in str(caught.value)
