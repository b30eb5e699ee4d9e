"""PyTorchJob construct: replicas, GPUs and processes kept consistent, placement, patches."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import ElasticPolicy, RunPolicy, apply_defaults, load_job
from kubetrain.api import PyTorchJob as PyTorchJobModel
from kubetrain.constructs.job_common import Placement
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.types import Quantity, Resources
from kubetrain.frameworks import ClusterAddressing, pytorch
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot
from tests.unit.constructs.jobs_helpers import TRAINER, synth


def build(**props: Any) -> dict[str, Any]:
    (obj,) = synth(
        lambda chart: PyTorchJob(chart, "Train", PyTorchJobProps(image=TRAINER, **props))
    )
    return obj


def test_four_node_gpu_job() -> None:
    obj = build(
        workers=3,
        gpus_per_node=8,
        command=("torchrun", "-m", "images.pytorch.train"),
        resources=Resources(cpu=Quantity.of(32), memory=Quantity.gibibytes(256)),
        run_policy=RunPolicy(clean_pod_policy="All", backoff_limit=2),
    )
    assert obj["metadata"] == {"name": "train", "namespace": "default"}
    spec = obj["spec"]
    assert spec["nprocPerNode"] == "8"
    assert spec["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 2}
    master, worker = spec["pytorchReplicaSpecs"]["Master"], spec["pytorchReplicaSpecs"]["Worker"]
    assert (master["replicas"], worker["replicas"]) == (1, 3)
    container = worker["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["resources"] == {
        "requests": {"cpu": "32", "memory": "256Gi"},
        "limits": {"memory": "256Gi", "nvidia.com/gpu": 8},
    }
    assert worker["template"]["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert_valid([obj])
    assert_snapshot("constructs/pytorchjob-4x8.yaml", dump_all([obj]))


def test_world_size_matches_what_the_operator_injects() -> None:
    obj = build(workers=3, gpus_per_node=8)
    job = apply_defaults(load_job(obj))
    assert isinstance(job, PyTorchJobModel)
    env = {
        e["name"]: e["value"] for e in pytorch.replica_env(job, "Worker", 0, ClusterAddressing())
    }
    assert env["WORLD_SIZE"] == "32"
    props = PyTorchJobProps(image=TRAINER, workers=3, gpus_per_node=8)
    assert props.world_size == 32


def test_cpu_job_runs_one_process_per_pod() -> None:
    obj = build(workers=2)
    assert obj["spec"]["nprocPerNode"] == "1"
    assert (
        "resources"
        not in obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    )


@pytest.mark.parametrize(
    ("placement", "key"),
    [
        (Placement.SAME_BLOCK, "requiredDuringSchedulingIgnoredDuringExecution"),
        (Placement.PREFER_SAME_BLOCK, "preferredDuringSchedulingIgnoredDuringExecution"),
    ],
    ids=["required", "preferred"],
)
def test_same_block_placement(placement: Placement, key: str) -> None:
    obj = build(workers=1, placement=placement, topology_key="example.com/ib-block")
    affinity = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"]
    (term,) = affinity["podAffinity"][key]
    term = term.get("podAffinityTerm", term)
    assert term == {
        "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "train"}},
        "topologyKey": "example.com/ib-block",
    }
    assert_valid([obj])


def test_elastic_job_without_master() -> None:
    obj = build(master=False, workers=2, elastic=ElasticPolicy(min_replicas=2, max_replicas=4))
    assert set(obj["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    assert obj["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 4}


def test_escape_hatch_patches_the_pod_template() -> None:
    def patch(replica_type: str, template: dict[str, Any]) -> dict[str, Any]:
        template["spec"]["hostIPC"] = replica_type == "Worker"
        return template

    obj = build(workers=1, patch_pod_template=patch)
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["template"]["spec"]["hostIPC"] is True
    assert specs["Master"]["template"]["spec"]["hostIPC"] is False


def test_fails_when_the_escape_hatch_breaks_the_pod() -> None:
    def patch(replica_type: str, template: dict[str, Any]) -> dict[str, Any]:
        template["spec"]["contaners"] = template["spec"].pop("containers")
        return template

    with pytest.raises(ValueError) as caught:
        build(workers=1, patch_pod_template=patch)
    message = str(caught.value)
    assert "test/Train" in message
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.contaners: unknown field" in message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"gpus_per_node": 8, "nproc_per_node": 4},
            "nproc_per_node (4) must equal gpus_per_node (8)",
        ),
        ({"workers": -1}, "workers (-1) must be >= 0"),
        ({"master": False, "workers": 0}, "workers (0) must be >= 1 when master is False"),
        ({"gpus_per_node": -2}, "gpus_per_node (-2) must be >= 0"),
        ({"resources": Resources(gpus=8)}, "resources.gpus (8) must not be set on a job"),
        ({"name": "Train_1"}, "name ('Train_1') must be a DNS-1035 label"),
        ({"restart_policy": "Sometimes"}, "restart_policy ('Sometimes') must be one of"),
        ({"env": {"1BAD": "x"}}, "env key ('1BAD') is not a valid environment variable name"),
        ({"master": False, "workers": 0, "elastic": ElasticPolicy()}, "workers (0) must be >= 1"),
        (
            {"termination_grace_seconds": -5},
            "termination_grace_seconds (-5) must be a whole number of seconds >= 0",
        ),
    ],
    ids=[
        "nproc-vs-gpus",
        "negative-workers",
        "no-replicas",
        "negative-gpus",
        "gpus-in-resources",
        "bad-name",
        "bad-restart-policy",
        "bad-env-key",
        "elastic-without-workers",
        "negative-grace",
    ],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        PyTorchJobProps(image=TRAINER, **props)
    assert message in str(caught.value)


def test_every_replica_gets_the_termination_grace_a_checkpoint_needs() -> None:
    obj = build(workers=2, termination_grace_seconds=120)
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert {
        t: s["template"]["spec"]["terminationGracePeriodSeconds"] for t, s in specs.items()
    } == {
        "Master": 120,
        "Worker": 120,
    }
    assert "terminationGracePeriodSeconds" not in str(build(workers=1))


def test_fails_when_the_name_is_too_long_for_its_pods() -> None:
    with pytest.raises(ValueError) as caught:
        build(name="a" * 60, workers=100)
    assert "metadata.name" in str(caught.value) and "job name too long" in str(caught.value)
