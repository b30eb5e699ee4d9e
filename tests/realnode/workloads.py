"""What the real-node tests submit and read back: the ``local`` stack's sample jobs as
synthesized, pod logs, and the closing line every training rank prints."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from images.common.trainkit import FINAL_LINE
from kubetrain import __version__
from kubetrain.manifest import parse_yaml
from tests.clusters import ClusterClients
from tests.integration.kube import condition
from tests.integration.operator.jobs import Jobs

OPERATOR_NAMESPACE = "kubetrain-system"
OPERATOR_IMAGE = f"ghcr.io/kubetrain/operator:{__version__}"
#: Every image the real-node tests run, as the stacks name them.
TRAINER_IMAGES = (
    OPERATOR_IMAGE,
    f"ghcr.io/kubetrain/pytorch-trainer:{__version__}",
    f"ghcr.io/kubetrain/tensorflow-trainer:{__version__}",
    f"ghcr.io/kubetrain/horovod-trainer:{__version__}",
)
#: How long a sample job may take on the real node (2 CPUs shared by every pod).
TRAINING_TIMEOUT = 420.0


def sample(stack_dir: Path, kind: str, namespace: str) -> dict[str, Any]:
    """The stack's synthesized sample of ``kind``, moved into ``namespace``."""
    for path in sorted((stack_dir / "04-samples").glob("*.yaml")):
        obj = parse_yaml(path.read_text())
        if obj.get("kind") == kind:
            obj["metadata"]["namespace"] = namespace
            obj["metadata"].pop("annotations", None)  # Argo CD's sync options only
            return dict(obj)
    raise AssertionError(f"the stack in {stack_dir} has no {kind} sample")


#: The line the PyTorch sample logs for each checkpoint it saves.
CHECKPOINT = re.compile(r"checkpoint step=(\d+)")


def node_directory(prefix: str) -> Path:
    """A checkpoint directory on the node. The real node is this machine: it is made here,
    writable by the images' unprivileged user."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o777)
    return directory


def checkpointing(
    job: dict[str, Any], directory: Path, *, steps: int, every: int, delay: float
) -> dict[str, Any]:
    """The stack's PyTorchJob sample running ``steps`` steps, ``delay`` seconds each,
    checkpointing every ``every`` steps (and on SIGTERM) to ``directory`` on the node,
    which outlives the pods."""
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        container["command"] = [
            *("python", "-m", "images.pytorch.train", "--steps", str(steps)),
            *("--step-delay", str(delay), "--checkpoint-every", str(every)),
            *("--checkpoint-dir", "/checkpoints"),
        ]
        container.pop("args", None)  # the stack's sample passes --steps there
        container["volumeMounts"] = [{"name": "checkpoints", "mountPath": "/checkpoints"}]
        pod["volumes"] = [
            {"name": "checkpoints", "hostPath": {"path": str(directory), "type": "Directory"}}
        ]
    return job


def pod_log(clients: ClusterClients, namespace: str, pod: str, container: str | None = None) -> str:
    """The pod's log, as ``kubectl logs`` reads it (through the kubelet)."""
    text = clients.core_v1.read_namespaced_pod_log(pod, namespace, container=container)
    return str(text)


def started_log(clients: ClusterClients, namespace: str, pod: str) -> str:
    """The pod's log, or "" while its container has not started (or once it is gone)."""
    try:
        return pod_log(clients, namespace, pod)
    except ApiException:
        return ""


def wait_finished(jobs: Jobs, kind: str, name: str) -> dict[str, Any]:
    """The job once it Succeeded or Failed."""
    done = jobs.wait(
        kind,
        name,
        lambda j: any(
            (condition(j, t) or {}).get("status") == "True" for t in ("Succeeded", "Failed")
        ),
        what=f"{kind} {name} to finish",
        timeout=TRAINING_TIMEOUT,
    )
    assert done is not None
    return done


def final_lines(log: str) -> dict[int, str]:
    """rank -> parameter digest of every ``final rank=...`` line in ``log``."""
    found: dict[int, str] = {}
    for line in log.splitlines():
        # mpirun prefixes nothing by default; strip whatever a launcher adds before "final".
        start = line.find("final rank=")
        match = FINAL_LINE.match(line[start:].strip()) if start >= 0 else None
        if match:
            found[int(match["rank"])] = match["digest"]
    return found


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    """The first container's terminated state (current, else last)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    assert statuses, f"pod {pod['metadata']['name']} has no container status"
    state = statuses[0].get("state") or {}
    last = statuses[0].get("lastState") or {}
    return dict(state.get("terminated") or last.get("terminated") or {})


def jobs_in(clients: ClusterClients, namespace: str) -> Jobs:
    return Jobs(clients.api_client, namespace)


# -- Kueue on the real node (the hang test's preemption, benchmarks/goodput.py) ---------------

KUEUE_API = "kueue.x-k8s.io/v1beta2"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: The queue (ClusterQueue and LocalQueues) of ``queue_objects``.
QUEUE = "goodput"
#: What each pod of a queued training job requests: two pods fit the queue's quota, four
#: do not.
CPU = "300m"


def queue_objects() -> list[dict[str, Any]]:
    """A flavor, a ClusterQueue fitting one job (1 CPU: two pods of 300m, not four) that
    preempts lower priorities, and the priority classes ``batch`` and ``urgent``."""
    quota = [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "64Gi"}]
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "node"}},
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": QUEUE},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": "node", "resources": quota}],
                    }
                ],
            },
        },
        *(
            {
                "apiVersion": KUEUE_API,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            for name, value in (("batch", 100), ("urgent", 1000))
        ),
    ]


def local_queue(namespace: str) -> dict[str, Any]:
    """The LocalQueue ``goodput`` of ``namespace``, into the ClusterQueue of that name."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": QUEUE},
    }


def sized(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with :data:`CPU` and 1 GiB requested by every pod, restarted on failure."""
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["restartPolicy"] = "OnFailure"
        container = spec["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": CPU, "memory": "1Gi"}}
    return job
