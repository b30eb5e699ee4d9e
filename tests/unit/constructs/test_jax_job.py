"""JAXJob construct: Workers only, one JAX process each, Worker 0 coordinating."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import JAXJob as JAXJobModel
from kubetrain.api import apply_defaults, load_job
from kubetrain.constructs import JAXJob, JAXJobProps, Placement
from kubetrain.frameworks import ClusterAddressing, jax
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, new_chart, synth


def build(**props: Any) -> dict[str, Any]:
    (obj,) = synth(lambda chart: JAXJob(chart, "Jax", JAXJobProps(image=TRAINER, **props)))
    return obj


def test_workers_on_gpus_in_one_block() -> None:
    obj = build(
        workers=4,
        gpus_per_node=8,
        placement=Placement.SAME_BLOCK,
        topology_key="example.com/ib-block",
        env={"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"},
    )
    assert obj["apiVersion"] == "kubeflow.org/v1" and obj["kind"] == "JAXJob"
    assert set(obj["spec"]["jaxReplicaSpecs"]) == {"Worker"}
    worker = obj["spec"]["jaxReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4 and worker["restartPolicy"] == "Never"
    pod = worker["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "jax"
    assert container["env"] == [
        {"name": "XLA_FLAGS", "value": "--xla_gpu_enable_latency_hiding_scheduler=true"}
    ]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"] == {"matchLabels": {"training.kubeflow.org/job-name": "jax"}}
    assert_valid([obj])


def test_world_size_is_what_the_operator_injects() -> None:
    construct = JAXJob(new_chart(), "Jax", JAXJobProps(image=TRAINER, workers=3))
    job = apply_defaults(load_job(construct.job.to_wire()))
    assert isinstance(job, JAXJobModel)
    env = {e["name"]: e["value"] for e in jax.replica_env(job, "Worker", 2, ClusterAddressing())}
    assert construct.world_size == int(env["NUM_PROCESSES"]) == 3
    assert env["PROCESS_ID"] == "2"


def test_fails_when_the_job_exceeds_the_replica_limit() -> None:
    with pytest.raises(ValueError) as caught:
        build(workers=1001)
    message = str(caught.value)
    assert "test/Jax" in message and "spec.jaxReplicaSpecs.Worker.replicas" in message
    assert "1001" in message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"workers": 0}, "workers (0) must be >= 1"),
        ({"restart_policy": "Sometimes"}, "restart_policy ('Sometimes') must be one of"),
        ({"gpus_per_node": -1}, "gpus_per_node (-1) must be >= 0"),
    ],
    ids=["no-workers", "bad-restart-policy", "negative-gpus"],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        JAXJobProps(image=TRAINER, **props)
    assert message in str(caught.value)
