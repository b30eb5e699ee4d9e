"""The peer benchmark's TrainJob workload (the SDK's body, upstream's runtime) and how
the observer counts upstream Trainer's children: JobSet -> Job -> pods."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.operator_scale import JobTimes
from benchmarks.peer_workload import (
    GPU_TOLERATION,
    PeerObserver,
    job_names,
    node_pod_key,
    sdk_name,
    sdk_runtime,
    sdk_trainjob,
)
from kubetrain.controller.kube import BATCH_JOBS, JOB_RESOURCES, PODS, SERVICES

TORCH_DISTRIBUTED = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-distributed
  labels: {trainer.kubeflow.org/framework: torch}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
            spec:
              template:
                spec:
                  containers:
                    - {name: node, image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime}
"""


def test_the_sdk_body_as_kubeflow_0_5_posts_it() -> None:
    body = sdk_trainjob("t00000000001", "bench")
    spec = body["spec"]
    assert spec["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "torch-distributed"}
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 4
    # Quantities are JSON floats, the same in requests and limits.
    assert trainer["resourcesPerNode"] == {
        "limits": {"nvidia.com/gpu": 1.0},
        "requests": {"nvidia.com/gpu": 1.0},
    }
    assert isinstance(trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"], float)
    command = trainer["command"]
    assert command[:2] == ["bash", "-c"]
    assert "read -r -d '' SCRIPT << EOM" in command[2]
    assert command[2].endswith('torchrun "train.py"')
    assert set(trainer) == {"command", "numNodes", "resourcesPerNode"}  # no image, no env


def test_names_have_the_sdks_shape_and_are_distinct() -> None:
    names = job_names("TrainJob", 300)
    assert len(set(names)) == 300
    assert all(re.fullmatch(r"[a-z][0-9a-f]{11}", name) for name in names)
    assert names[0] == sdk_name(0)
    assert job_names("PyTorchJob", 2) == ["pt-000", "pt-001"]
    assert job_names("MPIJob", 1) == ["mpi-000"]


def test_the_runtime_is_upstreams_with_the_gpu_toleration(tmp_path: Path) -> None:
    (tmp_path / "torch_distributed.yaml").write_text(TORCH_DISTRIBUTED, encoding="utf-8")
    runtime = sdk_runtime(tmp_path)
    (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == [GPU_TOLERATION]
    assert pod["containers"][0]["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    assert runtime["metadata"]["labels"] == {"trainer.kubeflow.org/framework": "torch"}


def test_another_runtime_under_the_file_name_is_refused(tmp_path: Path) -> None:
    text = TORCH_DISTRIBUTED.replace("name: torch-distributed", "name: jax-distributed")
    (tmp_path / "torch_distributed.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="is not the torch-distributed"):
        sdk_runtime(tmp_path)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("t00000000001-node-0-3-x7k2p", "t00000000001-node-0-3"),  # upstream's Job pod
        ("t00000000001-node-0-3", "t00000000001-node-0-3"),  # kubetrain's
        ("t00000000001-node-0-12-abcde", "t00000000001-node-0-12"),
        ("t00000000001-other-0-3-abcde", "t00000000001-other-0-3-abcde"),
        ("t00000000002-node-0-3-abcde", "t00000000002-node-0-3-abcde"),  # another job
    ],
)
def test_node_pod_key_drops_the_job_controllers_suffix(name: str, key: str) -> None:
    assert node_pod_key(name, "t00000000001") == key


def _owned(kind: str, name: str, owner: str, owner_name: str, **labels: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": [{"kind": owner, "name": owner_name, "controller": True}],
        },
    }


def _pod(name: str, owner: str, owner_name: str, job: str, phase: str) -> dict[str, Any]:
    pod = _owned("Pod", name, owner, owner_name, **{"jobset.sigs.k8s.io/jobset-name": job})
    pod["status"] = {"phase": phase}
    return pod


def _observer(job: str) -> tuple[PeerObserver, JobTimes]:
    times = JobTimes("TrainJob", submitted=100.0)
    return PeerObserver(object(), {job: times}), times  # type: ignore[arg-type]


def test_upstream_children_are_the_pods_and_the_service_the_jobset_owns() -> None:
    job = "t00000000001"
    observer, times = _observer(job)
    # Intermediate objects: the JobSet's Job and the runtime snapshot are not children.
    observer._child(
        BATCH_JOBS,
        _owned("Job", f"{job}-node-0", "JobSet", job, **{"jobset.sigs.k8s.io/jobset-name": job}),
    )
    assert times.first_child_at is None
    observer._child(SERVICES, _owned("Service", job, "JobSet", job))
    assert times.first_child_at is not None
    for index in range(4):
        name = f"{job}-node-0-{index}-abc1{index}"
        observer._child(PODS, _pod(name, "Job", f"{job}-node-0", job, "Pending"))
    assert times.children_at is not None
    assert times.seen == {("Service", job)} | {("Pod", f"{job}-node-0-{i}") for i in range(4)}
    for index in range(3):
        name = f"{job}-node-0-{index}-abc1{index}"
        observer._child(PODS, _pod(name, "Job", f"{job}-node-0", job, "Running"))
    assert times.running_at is None
    observer._child(PODS, _pod(f"{job}-node-0-3-abc13", "Job", f"{job}-node-0", job, "Running"))
    assert times.running_at is not None


def test_kubetrains_trainjob_runs_when_its_pods_do_not_by_its_status() -> None:
    job = "t00000000002"
    observer, times = _observer(job)
    trainjob = {"kind": "TrainJob", "metadata": {"name": job}, "status": {"state": "Running"}}
    observer._job(JOB_RESOURCES["TrainJob"], trainjob)
    assert times.running_at is None
    for index in range(4):
        pod = _pod(f"{job}-node-0-{index}", "TrainJob", job, job, "Running")
        observer._child(PODS, pod)
    assert times.running_at is not None
    assert times.children_at is None  # its Service is still missing
