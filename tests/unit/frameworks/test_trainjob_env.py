"""The environment a TrainJob's nodes get, per framework, against upstream Trainer
v2.3.0's tables (../shared/reference/trainer-v2-sdk-facts.md, section 5.5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks import ClusterAddressing, LocalAddressing, mpi, trainjob
from kubetrain.frameworks.registry import resolve_trainjob
from kubetrain.frameworks.trainjob_nodes import COMPLETION_INDEX_FIELD
from tests.unit.api.test_trainer_resolve import rjob, runtime
from tests.unit.api.test_trainer_resolve import trainjob as make_trainjob

CLUSTER = ClusterAddressing()


def job(
    policy: dict[str, Any], *, resources: dict[str, Any] | None = None, **trainer: Any
) -> ResolvedTrainJob:
    base = rjob("node", trainer=True)
    if resources is not None:
        base["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    spec = {"trainer": trainer} if trainer else {}
    return resolve_trainjob(make_trainjob(**spec), runtime(policy, [base]))


def env(
    resolved: ResolvedTrainJob, index: int, container: str = "node", rjob_name: str = "node"
) -> dict[str, str]:
    """The variables as the kubelet gives them to pod ``index`` (a variable read from the
    completion-index annotation, as upstream reads it, holds the index)."""
    found = trainjob.FRAMEWORK.container_env(
        resolved, rjob_name, index, {"name": container}, CLUSTER
    )
    out = {}
    for var in found:
        if "valueFrom" in var:
            assert var["valueFrom"] == {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}
            out[var["name"]] = str(index)
        else:
            out[var["name"]] = var["value"]
    return out


@pytest.mark.parametrize(
    ("policy", "variable"),
    [({"torch": {}}, "PET_NODE_RANK"), ({"jax": {}}, "JAX_PROCESS_ID")],
)
def test_the_rank_is_read_from_the_completion_index_annotation(
    policy: dict[str, Any], variable: str
) -> None:
    """Upstream's plugins set the rank with a fieldRef, not a literal: a pod's env says
    the same whichever index it has, and the rank is the annotation's."""
    resolved = job(policy, numNodes=2)
    for index in (0, 1):
        found = trainjob.FRAMEWORK.container_env(resolved, "node", index, {"name": "node"}, CLUSTER)
        (rank,) = [v for v in found if v["name"] == variable]
        path = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        assert rank == {"name": variable, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def test_torch_on_gpu_nodes() -> None:
    resolved = job({"torch": {}}, numNodes=3, resourcesPerNode={"limits": {"nvidia.com/gpu": 8}})
    assert env(resolved, 2) == {
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "auto",
        "PET_NODE_RANK": "2",
        "PET_MASTER_ADDR": "tj-node-0-0.tj",
        "PET_MASTER_PORT": "29500",
    }


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"requests": {"cpu": "3"}, "limits": {"cpu": "8"}}, "3"),  # the request counts
        ({"limits": {"cpu": "2.5"}}, "3"),  # rounded up
        ({"requests": {"cpu": "500m"}}, "1"),  # at least one
        (None, "1"),
    ],
    ids=["request", "limit-rounded-up", "fraction", "none"],
)
def test_torch_on_cpu_nodes_counts_the_pods_cpus(
    resources: dict[str, Any] | None, expected: str
) -> None:
    # torchrun's "auto" on CPU would be the host's CPU count, not the pod's share.
    resolved = job({"torch": {}}, resources=resources)
    assert env(resolved, 0)["PET_NPROC_PER_NODE"] == expected


def test_torch_num_proc_per_node_wins() -> None:
    resolved = job(
        {"torch": {}}, numProcPerNode=4, resourcesPerNode={"limits": {"nvidia.com/gpu": 8}}
    )
    assert env(resolved, 0)["PET_NPROC_PER_NODE"] == "4"


def test_torch_env_injection_targets_get_the_same_variables() -> None:
    base = rjob("node", trainer=True)
    base["template"]["spec"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "s"}
    )
    policy = {
        "torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["sidecar"]}]}}
    }
    resolved = resolve_trainjob(make_trainjob(), runtime(policy, [base]))
    assert env(resolved, 0, "sidecar")["PET_NODE_RANK"] == "0"
    assert env(resolved, 0, "other") == {}


def test_jax() -> None:
    resolved = job({"jax": {}}, numNodes=4)
    assert env(resolved, 3) == {
        "JAX_NUM_PROCESSES": "4",
        "JAX_PROCESS_ID": "3",
        "JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500",
    }


@pytest.mark.parametrize(("gpus", "workers"), [(None, "2"), (4, "8")], ids=["cpu", "gpu"])
def test_xgboost(gpus: int | None, workers: str) -> None:
    limits = {"resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}
    resolved = job({"xgboost": {}}, numNodes=2, **limits)
    assert env(resolved, 1) == {
        "DMLC_TRACKER_URI": "tj-node-0-0.tj",
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": "1",
        "DMLC_NUM_WORKER": workers,
    }


def test_a_plain_runtime_gets_nothing() -> None:
    assert env(job({}), 0) == {}


def mpi_job(policy: dict[str, Any], *, gpus: int | None = None, **trainer: Any) -> ResolvedTrainJob:
    node = rjob("node")
    launcher = rjob("launcher", trainer=True)
    if gpus:
        launcher["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "limits": {"nvidia.com/gpu": gpus}
        }
    spec = {"trainer": trainer} if trainer else {}
    return resolve_trainjob(make_trainjob(**spec), runtime(policy, [node, launcher]))


def test_mpi_hostfile_and_launcher_env() -> None:
    resolved = mpi_job({"numNodes": 3, "mpi": {"runLauncherAsNode": True, "numProcPerNode": 2}})
    domain = "tj.ns.svc"
    assert mpi.trainjob_hostfile(resolved, CLUSTER) == (
        f"tj-launcher-0-0.{domain} slots=2\n"
        f"tj-node-0-0.{domain} slots=2\n"
        f"tj-node-0-1.{domain} slots=2\n"
    )
    assert env(resolved, 0, rjob_name="launcher") == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "2",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    }
    assert env(resolved, 0, rjob_name="node") == {}  # sshd only


@pytest.mark.parametrize(
    ("runtime_slots", "gpus", "trainer_slots", "expected"),
    [(1, 8, None, 8), (2, 8, None, 2), (1, None, None, 1), (1, 8, 3, 3)],
    ids=["one-per-gpu", "runtime-says", "cpu", "trainjob-says"],
)
def test_mpi_slots(
    runtime_slots: int, gpus: int | None, trainer_slots: int | None, expected: int
) -> None:
    extra = {"numProcPerNode": trainer_slots} if trainer_slots else {}
    resolved = mpi_job(
        {"numNodes": 2, "mpi": {"numProcPerNode": runtime_slots}}, gpus=gpus, **extra
    )
    assert mpi.trainjob_slots(resolved) == expected


def test_locally_every_node_is_this_machine() -> None:
    resolved = job({"torch": {}}, numNodes=2)
    local = LocalAddressing(ports={("node", 0): 41234})
    found = trainjob.FRAMEWORK.container_env(resolved, "node", 1, {"name": "node"}, local)
    values = {e["name"]: e.get("value") for e in found}
    assert (values["PET_MASTER_ADDR"], values["PET_MASTER_PORT"]) == ("127.0.0.1", "41234")


def test_pods_are_named_as_jobset_names_their_hosts() -> None:
    resolved = mpi_job({"numNodes": 3, "mpi": {"runLauncherAsNode": True}})
    assert [p for _, _, p in trainjob.pod_names(resolved)] == [
        "tj-node-0-0",
        "tj-node-0-1",
        "tj-launcher-0-0",
    ]


def test_tensorflow_runtimes_get_tf_config() -> None:
    # Upstream has no TensorFlow policy: kubetrain reads the runtime's framework label.
    base = rjob("node", trainer=True)
    rt = runtime({"numNodes": 2}, [base])
    labelled = rt.model_copy(
        update={
            "metadata": rt.metadata.model_copy(
                update={"labels": {"trainer.kubeflow.org/framework": "tensorflow"}}
            )
        }
    )
    resolved = resolve_trainjob(make_trainjob(), labelled)
    config = json.loads(env(resolved, 1)["TF_CONFIG"])
    assert config == {
        "cluster": {"worker": ["tj-node-0-0.tj:2222", "tj-node-0-1.tj:2222"]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    # Without the label, a policy-less runtime is plain: nothing injected.
    assert env(resolve_trainjob(make_trainjob(), rt), 1) == {}
