"""A drain of the real node under a training PyTorchJob, with real torch.distributed
processes in real pods: ``kubectl drain`` evicts its pods (the Eviction API, each with
its termination grace), the gang restarts as the job's next attempt, its pods wait
Pending while the node is cordoned, and after ``kubectl uncordon`` the job resumes from
its last checkpoint and finishes every step. The job's ``backoffLimit`` is 0: the
eviction was the infrastructure's, so had it been counted the job would have failed.

Upstream (training-operator v1.9) recreates each evicted pod on its own and counts it
against ``backoffLimit``: with 0 the job fails.

(The file is named to run after ``test_helm_upgrade.py``, which needs the operator not
installed yet: the tier runs its files in name order.)"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from cluster.local import LocalCluster
from kubetrain.api import keys as K
from tests.clusters import ClusterClients
from tests.integration.kube import condition, wait_for
from tests.realnode.workloads import TRAINING_TIMEOUT, final_lines, jobs_in, pod_log, sample

pytestmark = pytest.mark.usefixtures("installed_stack")

STEPS = 40
EVERY = 5
CHECKPOINT = re.compile(r"checkpoint step=(\d+)")
RESUMED = re.compile(r"resume step=(\d+) .* attempt=1 reason=(\w+)")


def _checkpointing(job: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The sample, slowed to half a second a step, checkpointing every EVERY steps to
    ``directory`` on the node (it outlives the pods); backoffLimit 0."""
    job["spec"].setdefault("runPolicy", {})["backoffLimit"] = 0
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        container["command"] = [
            *("python", "-m", "images.pytorch.train", "--steps", str(STEPS)),
            *("--step-delay", "0.5", "--checkpoint-every", str(EVERY)),
            *("--checkpoint-dir", "/checkpoints"),
        ]
        container.pop("args", None)  # the stack's sample passes --steps there
        container["volumeMounts"] = [{"name": "checkpoints", "mountPath": "/checkpoints"}]
        pod["volumes"] = [
            {
                "name": "checkpoints",
                "hostPath": {"path": str(directory), "type": "Directory"},
            }
        ]
    return job


#: How many drains the test runs (``benchmarks/drain_recovery.py`` asks for more, to time
#: them); each prints its figures.
TRIALS = int(os.environ.get("KUBETRAIN_DRAIN_TRIALS", "1"))


def test_a_drained_job_waits_then_resumes_from_its_checkpoint(
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
    node_name: str,
) -> None:
    for trial in range(TRIALS):
        figures = _drain_once(
            f"drained-{trial}",
            installed_stack,
            real_node_cluster,
            real_node_clients,
            node_namespace,
            node_name,
        )
        print(
            f"drain trial {trial + 1}: eviction -> new gang Pending {figures[0]:.1f} s; "
            f"uncordon -> training again {figures[1]:.1f} s"
        )


def _drain_once(
    name: str,
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
    node_name: str,
) -> tuple[float, float]:
    """One drain of a training job, checked; (seconds from the drain's start to the new
    gang Pending, seconds from the uncordon to the first step trained after resuming)."""
    jobs = jobs_in(real_node_clients, node_namespace)
    # The real node is this machine: the directory the pods mount is made here, writable by
    # the images' unprivileged user.
    directory = Path(tempfile.mkdtemp(prefix="kubetrain-drain-"))
    directory.chmod(0o777)
    job = _checkpointing(sample(installed_stack, "PyTorchJob", node_namespace), directory)
    job["metadata"]["name"] = name
    jobs.create(job)
    master = f"{name}-master-0"

    def log_of(pod: str) -> str:
        try:
            return pod_log(real_node_clients, node_namespace, pod)
        except ApiException:  # the container has not started yet
            return ""

    def saved() -> list[int]:
        current = jobs.get("PyTorchJob", name) or {}
        failed = condition(current, "Failed") or {}
        assert failed.get("status") != "True", f"the job failed before its drain: {failed}"
        return [int(m) for m in CHECKPOINT.findall(log_of(master))]

    before = wait_for(
        saved, lambda s: len(s) >= 2, what="two checkpoints", timeout=TRAINING_TIMEOUT
    )
    old = {n: p["metadata"]["uid"] for n, p in jobs.pods(name).items()}
    drained = time.monotonic()
    try:
        real_node_cluster.kubectl(
            "drain",
            node_name,
            f"--pod-selector={K.JOB_NAME}={name}",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=120s",
        )
        # The gang restarted as attempt 1 and waits, Pending, for a schedulable node.
        event = jobs.wait_event(name, "GangRestart", timeout=60)
        assert "infrastructure restarts used: 1 of 10" in event["message"], event["message"]
        # Its master comes first (the workers wait for it), Pending on the cordoned node.
        pending = jobs.wait_pods(
            name,
            lambda p: (
                bool(p)
                and not set(old.values()) & {x["metadata"]["uid"] for x in p.values()}
                and all(x["status"].get("phase") == "Pending" for x in p.values())
            ),
            what="the new gang Pending on the cordoned node",
            timeout=90,
        )
        to_pending = time.monotonic() - drained
        assert {p["metadata"]["labels"][K.ATTEMPT_LABEL] for p in pending.values()} == {"1"}
        # The Restarting condition says why, and what the new pods wait for.
        waiting = jobs.wait(
            "PyTorchJob",
            name,
            lambda j: "Unschedulable" in str((condition(j, "Restarting") or {}).get("message")),
            what="the Restarting condition to say the new pods are unschedulable",
            timeout=30,
        )
        message = str((condition(waiting or {}, "Restarting") or {}).get("message"))
        assert "as attempt 1" in message, message
        assert f"Waiting: pod {master} Unschedulable" in message, message
    finally:
        real_node_cluster.kubectl("uncordon", node_name)
    uncordoned = time.monotonic()
    # Training again: a step logged after the resume line.
    wait_for(
        lambda: log_of(master).partition("resume step=")[2],
        lambda after: "step=" in after.partition("\n")[2],
        what=f"{master} to train again after resuming",
        timeout=TRAINING_TIMEOUT,
        interval=0.2,
    )
    to_training = time.monotonic() - uncordoned
    done = jobs.wait(
        "PyTorchJob",
        name,
        lambda j: any(
            (condition(j, t) or {}).get("status") == "True" for t in ("Succeeded", "Failed")
        ),
        what="the drained job to finish",
        timeout=TRAINING_TIMEOUT,
    )
    assert done is not None
    log = log_of(master)
    assert (condition(done, "Succeeded") or {}).get("status") == "True", (
        done["status"],
        log[-3000:],
    )
    # Resumed from the checkpoint it had saved, not from scratch: no more than EVERY steps
    # (those since the last checkpoint) were trained twice.
    resumed = RESUMED.search(log)
    assert resumed is not None, log[-3000:]
    step = int(resumed.group(1))
    assert step >= max(before) and step % EVERY == 0, (step, before)
    assert resumed.group(2) == "EvictionByEvictionAPI", resumed.group(0)
    shutil.rmtree(directory, ignore_errors=True)
    digests = final_lines(log) | final_lines(log_of(f"{name}-worker-0"))
    assert sorted(digests) == [0, 1] and len(set(digests.values())) == 1, digests
    assert f"final rank=0 step={STEPS} " in log, log[-2000:]
    statuses = done["status"].get("replicaStatuses") or {}
    assert not any(s.get("restarts") for s in statuses.values()), statuses
    jobs.delete("PyTorchJob", name)
    return to_pending, to_training
