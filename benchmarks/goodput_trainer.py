"""Upstream Trainer v2.3 + JobSet's phase of ``benchmarks/goodput.py``: the same training as
a TrainJob, the same faults, on the same control plane and real node.

Trainer serves the TrainJob CRD kubetrain serves, so its phase runs last and takes the
cluster over (``take_over``): kubetrain's operator Deployment scaled to zero (nothing of
kubetrain reconciles afterwards), Kueue stopped, upstream's CRDs (TrainJob and both
runtimes, JobSet) applied over kubetrain's, Trainer's and JobSet's controller managers
started with their webhooks as ``benchmarks.peer_trainer`` runs them, and Kueue started
again with its TrainJob integration.

The job is what a data scientist submits against upstream's ``torch-distributed``
ClusterTrainingRuntime, run as ``goodput-torch``: that runtime (upstream's file) with
the benchmark's checkpoint directory on the node mounted in the trainer's container, its
pods restarted on failure (JobSet's default, written out) and the JobSet restarted up
to ``--backoff-limit`` times when a Job fails (``failurePolicy.maxRestarts``: what the
PyTorchJobs get as ``runPolicy.backoffLimit``). The TrainJob runs the same sample
(``torchrun -m images.pytorch.train``, one process a node: torchrun reads Trainer's
``PET_*`` variables) with the same steps, checkpoint interval and 300m a node. Trainer
v2.3 has no progress server on by default and no hang detection: the job's progress
annotations mean nothing to it.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from benchmarks.peer_trainer import CLUSTER_RUNTIMES, UpstreamTrainer
from benchmarks.peer_workload import RUNTIME_FILE, sdk_runtime
from cluster.kueue import QUEUE_NAME_LABEL, TRAINJOB_INTEGRATION, Kueue
from cluster.local import LocalCluster
from cluster.tools import Tools
from kubetrain.controller.kube import KubeApi
from kubetrain.manifest import parse_yaml
from stacks.local import STACK
from tests.realnode.workloads import CPU, PRIORITY_LABEL, QUEUE

RUNTIME = "goodput-torch"
#: Where the checkpoint directory is mounted in the trainer's container.
MOUNT = "/checkpoints"


def goodput_runtime(runtimes_dir: Path, directory: Path, *, backoff_limit: int) -> dict[str, Any]:
    """Upstream's ``torch-distributed`` runtime as ``goodput-torch`` (see the module)."""
    path = runtimes_dir / RUNTIME_FILE
    runtime: dict[str, Any] = copy.deepcopy(parse_yaml(path.read_text(encoding="utf-8")))
    runtime["metadata"]["name"] = RUNTIME
    jobset = runtime["spec"]["template"]["spec"]
    jobset["failurePolicy"] = {"maxRestarts": backoff_limit}
    for rjob in jobset["replicatedJobs"]:
        if rjob["name"] != "node":
            continue
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod["restartPolicy"] = "OnFailure"
        pod["volumes"] = [
            {"name": "checkpoints", "hostPath": {"path": str(directory), "type": "Directory"}}
        ]
        for container in pod["containers"]:
            if container["name"] == "node":
                container["volumeMounts"] = [{"name": "checkpoints", "mountPath": MOUNT}]
    return runtime


def trainjob(
    name: str,
    namespace: str,
    image: str,
    *,
    priority: str,
    steps: int,
    every: int,
    delay: float,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The benchmark's training as a TrainJob of 2 nodes on ``goodput-torch``; its
    checkpoints in a directory of its own name under the runtime's."""
    command = [
        *("torchrun", "-m", "images.pytorch.train", "--steps", str(steps)),
        *("--step-delay", str(delay), "--checkpoint-every", str(every)),
        *("--checkpoint-dir", f"{MOUNT}/{name}"),
    ]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {QUEUE_NAME_LABEL: QUEUE, PRIORITY_LABEL: priority},
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "runtimeRef": {"kind": "ClusterTrainingRuntime", "name": RUNTIME},
            "trainer": {
                "image": image,
                "command": command,
                "numNodes": 2,
                "numProcPerNode": 1,
                "resourcesPerNode": {"requests": {"cpu": CPU, "memory": "1Gi"}},
            },
        },
    }


def take_over(
    cluster: LocalCluster,
    kueue: Kueue,
    tools: Tools,
    workdir: Path,
    *,
    namespace: str,
    directory: Path,
    backoff_limit: int,
) -> tuple[UpstreamTrainer, Kueue]:
    """Hand the cluster's TrainJobs to upstream (see the module); return Trainer's
    processes and the Kueue started again. ``namespace`` must exist (the webhooks are
    proven there)."""
    started = time.monotonic()
    operator = STACK.operator
    cluster.kubectl(
        *("-n", operator.namespace, "scale", "deployment", operator.name, "--replicas=0")
    )
    cluster.kubectl(
        *("-n", operator.namespace, "wait", "--for=delete", "pod"),
        "-l",
        ",".join(f"{key}={value}" for key, value in operator.selector.items()),
        "--timeout=120s",
        check=False,
    )
    kueue.stop()
    deadline = time.monotonic() + 120
    cluster.install_crds([*tools.trainer_crds, tools.jobset_crd], deadline=deadline)
    api = KubeApi.connect(str(cluster.kubeconfig))
    api.apply(sdk_runtime(tools.trainer_runtimes_dir), resource=CLUSTER_RUNTIMES)
    api.apply(
        goodput_runtime(tools.trainer_runtimes_dir, directory, backoff_limit=backoff_limit),
        resource=CLUSTER_RUNTIMES,
    )
    trainer = UpstreamTrainer(api, cluster.kubeconfig, tools, workdir)
    trainer.start(namespace=namespace, log_prefix=workdir / "upstream", qps=None, burst=None)
    kueue = Kueue(cluster, integrations=("kubeflow.org/pytorchjob", TRAINJOB_INTEGRATION))
    kueue.start()
    print(
        f"upstream Trainer v2.3 + JobSet hold the TrainJobs, Kueue restarted with "
        f"{TRAINJOB_INTEGRATION}, in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    return trainer, kueue
