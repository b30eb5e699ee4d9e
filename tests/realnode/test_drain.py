"""A drain of the real node under a training PyTorchJob, with real torch.distributed
processes in real pods: ``kubectl drain`` evicts its pods (the Eviction API, each with
its termination grace), the gang restarts as the job's next attempt, its pods wait
Pending while the node is cordoned, and after ``kubectl uncordon`` the job resumes from
its last checkpoint and finishes every step. The job's ``backoffLimit`` is 0: the
eviction was the infrastructure's, so had it been counted the job would have failed.

Upstream (training-operator v1.9) recreates each evicted pod on its own and counts it
against ``backoffLimit``: with 0 the job fails."""

from __future__ import annotations

import re
import shutil
import tempfile
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
    job["metadata"]["name"] = "drained"
    job["spec"].setdefault("runPolicy", {})["backoffLimit"] = 0
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        container["command"] = [
            *("python", "-m", "images.pytorch.train", "--steps", str(STEPS)),
            *("--step-delay", "0.5", "--checkpoint-every", str(EVERY)),
            *("--checkpoint-dir", "/checkpoints"),
        ]
        container["volumeMounts"] = [{"name": "checkpoints", "mountPath": "/checkpoints"}]
        pod["volumes"] = [
            {
                "name": "checkpoints",
                "hostPath": {"path": str(directory), "type": "Directory"},
            }
        ]
    return job


def test_a_drained_job_waits_then_resumes_from_its_checkpoint(
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
    node_name: str,
) -> None:
    jobs = jobs_in(real_node_clients, node_namespace)
    # The real node is this machine: the directory the pods mount is made here, writable by
    # the images' unprivileged user.
    directory = Path(tempfile.mkdtemp(prefix="kubetrain-drain-"))
    directory.chmod(0o777)
    jobs.create(_checkpointing(sample(installed_stack, "PyTorchJob", node_namespace), directory))
    master = "drained-master-0"

    def saved() -> list[int]:
        job = jobs.get("PyTorchJob", "drained") or {}
        failed = condition(job, "Failed") or {}
        assert failed.get("status") != "True", f"the job failed before its drain: {failed}"
        try:
            return [
                int(m)
                for m in CHECKPOINT.findall(pod_log(real_node_clients, node_namespace, master))
            ]
        except ApiException:  # the container has not started yet
            return []

    before = wait_for(
        saved, lambda s: len(s) >= 2, what="two checkpoints", timeout=TRAINING_TIMEOUT
    )
    old = {n: p["metadata"]["uid"] for n, p in jobs.pods("drained").items()}
    selector = f"{K.JOB_NAME}=drained"
    try:
        real_node_cluster.kubectl(
            "drain",
            node_name,
            f"--pod-selector={selector}",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=120s",
        )
        # The gang restarted as attempt 1 and waits, Pending, for a schedulable node.
        event = jobs.wait_event("drained", "GangRestart", timeout=60)
        assert "infrastructure restarts used: 1 of 10" in event["message"], event["message"]
        # Its master comes first (the workers wait for it), Pending on the cordoned node.
        pending = jobs.wait_pods(
            "drained",
            lambda p: (
                bool(p)
                and not set(old.values()) & {x["metadata"]["uid"] for x in p.values()}
                and all(x["status"].get("phase") == "Pending" for x in p.values())
            ),
            what="the new gang Pending on the cordoned node",
            timeout=90,
        )
        assert {p["metadata"]["labels"][K.ATTEMPT_LABEL] for p in pending.values()} == {"1"}
        # The Restarting condition says why, and what the new pods wait for.
        waiting = jobs.wait(
            "PyTorchJob",
            "drained",
            lambda j: "Unschedulable" in str((condition(j, "Restarting") or {}).get("message")),
            what="the Restarting condition to say the new pods are unschedulable",
            timeout=30,
        )
        message = str((condition(waiting or {}, "Restarting") or {}).get("message"))
        assert "as attempt 1" in message, message
        assert "Waiting: pod drained-master-0 Unschedulable" in message, message
        job = jobs.get("PyTorchJob", "drained")
        assert job is not None and (condition(job, "Failed") or {}).get("status") != "True"
    finally:
        real_node_cluster.kubectl("uncordon", node_name)
    done = jobs.wait(
        "PyTorchJob",
        "drained",
        lambda j: any(
            (condition(j, t) or {}).get("status") == "True" for t in ("Succeeded", "Failed")
        ),
        what="the drained job to finish",
        timeout=TRAINING_TIMEOUT,
    )
    assert done is not None
    log = pod_log(real_node_clients, node_namespace, master)
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
    digests = final_lines(log) | final_lines(
        pod_log(real_node_clients, node_namespace, "drained-worker-0")
    )
    assert sorted(digests) == [0, 1] and len(set(digests.values())) == 1, digests
    assert f"final rank=0 step={STEPS} " in log, log[-2000:]
    statuses = done["status"].get("replicaStatuses") or {}
    assert not any(s.get("restarts") for s in statuses.values()), statuses
