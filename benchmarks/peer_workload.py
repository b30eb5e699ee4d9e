"""The peer benchmark's workload and how it is observed (``benchmarks.peers``).

The bursts' job bodies: operator_scale's PyTorchJob and MPIJob, and the TrainJob the
Kubeflow SDK posts (``sdk_trainjob``) against upstream's ``torch-distributed``
ClusterTrainingRuntime (``sdk_runtime``), the same objects for kubetrain and for
upstream Trainer. ``PeerObserver`` is operator_scale's observer told how each peer names
and labels its children, and when a TrainJob runs (see ``benchmarks.peers``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.operator_scale import (
    NAMESPACE,
    TRAINJOB_NODES,
    JobTimes,
    Observer,
    mpi_job,
    pytorch_job,
)
from benchmarks.operator_scale import submit as burst
from cluster.topology import GPU_RESOURCE
from kubetrain.api.keys import JOBSET_NAME_LABEL
from kubetrain.controller.kube import KubeApi, Resource
from kubetrain.manifest import parse_yaml

#: The runtime the SDK's ``train()`` uses by default, as upstream ships it.
RUNTIME_NAME = "torch-distributed"
RUNTIME_FILE = "torch_distributed.yaml"
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


# The SDK's TrainJobs ----------------------------------------------------------------------


def sdk_name(index: int) -> str:
    """A name of the SDK's shape (a letter and 11 hex digits), one per index."""
    return f"t{index:011x}"


#: The function a user passes to ``CustomTrainer``; the SDK ships its source in the command.
_TRAIN_SOURCE = """def train():
    import torch.distributed as dist
    dist.init_process_group()
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}")
"""


def sdk_trainjob(name: str, namespace: str, *, num_nodes: int = 4, gpus: int = 1) -> dict[str, Any]:
    """The TrainJob ``TrainerClient().train(CustomTrainer(train, num_nodes=4,
    resources_per_node={"nvidia.com/gpu": 1}), runtime="torch-distributed")`` posts
    (kubeflow 0.5.0; /work/shared/reference/trainer-v2-sdk-facts.md section 3): the
    function in an unquoted heredoc written to a file and run by a bare ``torchrun``,
    quantities as JSON floats in identical requests and limits, no ``apiGroup``. The
    namespace, which the SDK puts in the URL only, is in the body for the client here."""
    script = (
        f"\nread -r -d '' SCRIPT << EOM\n\n{_TRAIN_SOURCE}\ntrain()\n\nEOM\n"
        'printf "%s" "$SCRIPT" > "train.py"\ntorchrun "train.py"'
    )
    quantity = {GPU_RESOURCE: float(gpus)}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"kind": "ClusterTrainingRuntime", "name": RUNTIME_NAME},
            "trainer": {
                "command": ["bash", "-c", script],
                "numNodes": num_nodes,
                "resourcesPerNode": {"limits": dict(quantity), "requests": dict(quantity)},
            },
        },
    }


def sdk_runtime(runtimes_dir: Path) -> dict[str, Any]:
    """Upstream's ``torch-distributed`` ClusterTrainingRuntime with one change: its pods
    tolerate the fake GPU nodes' ``nvidia.com/gpu`` taint (what a cluster's
    ExtendedResourceToleration admission plugin, or its operator, adds; the local API
    server runs without it)."""
    path = runtimes_dir / RUNTIME_FILE
    runtime: dict[str, Any] = parse_yaml(path.read_text(encoding="utf-8"))
    if runtime.get("metadata", {}).get("name") != RUNTIME_NAME:
        raise ValueError(f"{path} is not the {RUNTIME_NAME} ClusterTrainingRuntime")
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod.setdefault("tolerations", []).append(dict(GPU_TOLERATION))
    return runtime


# Observing the burst -------------------------------------------------------------------


def node_pod_key(name: str, job: str) -> str:
    """A TrainJob node pod's name without the random suffix the Job controller adds to
    upstream's (``<job>-node-0-<index>-<random>``): the name kubetrain gives it."""
    match = re.fullmatch(rf"({re.escape(job)}-node-\d+-\d+)-[a-z0-9]{{5}}", name)
    return match.group(1) if match else name


class PeerObserver(Observer):
    """The operator_scale observer, told how the Go operators name and label children.

    training-operator labels every pod and Service with the job name (as kubetrain
    does); mpi-operator labels its Service, ConfigMap, Secret and launcher Job only with
    ``app: <job>``, and names its SSH Secret ``<job>-ssh``. A child's controlling owner
    reference names its job for every operator, so that is what is read; upstream
    Trainer's JobSet is named after its TrainJob (and owns the headless Service), and the
    pods of the JobSet's Jobs are labelled with the JobSet's name, as kubetrain's are.
    A TrainJob counts its pods and Service only, and runs when its node pods all do (see
    the module's docstring).
    """

    def job_of(self, obj: dict[str, Any]) -> str | None:
        metadata = obj.get("metadata", {})
        for owner in metadata.get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") in ("PyTorchJob", "MPIJob", "JobSet"):
                return str(owner["name"])
        jobset = (metadata.get("labels") or {}).get(JOBSET_NAME_LABEL)
        return str(jobset) if jobset is not None else super().job_of(obj)

    def child_key(self, kind: str, name: str, job: str) -> tuple[str, str]:
        if kind == "Secret" and name == f"{job}-ssh":
            return (kind, f"{job}-ssh-")
        if kind == "Pod":
            return (kind, node_pod_key(name, job))
        return super().child_key(kind, name, job)

    def _child(self, resource: Resource, obj: dict[str, Any]) -> None:
        job = str(self.job_of(obj))
        times = self.jobs.get(job)
        if times is None or times.kind != "TrainJob":
            super()._child(resource, obj)
            return
        if resource.kind not in ("Pod", "Service"):
            return  # upstream's intermediate objects: a Job of the JobSet
        super()._child(resource, obj)
        with self.lock:
            nodes = {node_pod_key(name, job) for name in times.running_pods}
            if times.running_at is None and len(nodes) >= TRAINJOB_NODES:
                times.running_at = time.monotonic()

    def _job(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource.kind != "TrainJob":  # a TrainJob runs when its pods do (_child)
            super()._job(resource, obj)

    def gated_children(self, kind: str, job: str) -> set[tuple[str, str]]:
        # Only "all children" is compared: the Go operators gate nothing (training-operator
        # creates every pod at once with an init container that waits for the master).
        return set()


def job_body(kind: str, name: str) -> dict[str, Any]:
    """The burst's job: operator_scale's PyTorchJob and MPIJob, the SDK's TrainJob."""
    if kind == "TrainJob":
        return sdk_trainjob(name, NAMESPACE, num_nodes=TRAINJOB_NODES)
    return {"PyTorchJob": pytorch_job, "MPIJob": mpi_job}[kind](name)


def job_names(kind: str, jobs: int) -> list[str]:
    if kind == "TrainJob":
        return [sdk_name(i) for i in range(jobs)]
    prefix = "pt" if kind == "PyTorchJob" else "mpi"
    return [f"{prefix}-{i:03d}" for i in range(jobs)]


def submit(api: KubeApi, kind: str, times: Mapping[str, JobTimes], *, threads: int) -> None:
    """Create the jobs from ``threads`` threads (operator_scale's burst, this module's
    bodies)."""
    burst(api, [(kind, name) for name in times], times, threads=threads, build=job_body)
