"""A container killed by a signal and a pod evicted, in one training PyTorchJob on the real
node with real torch.distributed processes: the kill is the program's failure (the job's
restart limit, ``backoffLimit`` 1 under ``kubetrain.dev/restart-scope: Gang``, is used up
by it), the eviction the infrastructure's (counted apart, the limit untouched), and the
job resumes from its checkpoint after each and succeeds. Had the eviction been counted
too, the job would have failed.

The kill is containerd's (``ctr task kill -s SIGKILL``), what the kernel's OOM killer or a
crashing runtime does to a container; the eviction is the Eviction API's, what
``kubectl drain`` and the node-pressure and taint managers use.

(The file is named to run after ``test_helm_upgrade.py``, which needs the operator not
installed yet: the tier runs its files in name order.)"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cluster.local import LocalCluster
from kubetrain.api import keys as K
from tests.clusters import ClusterClients
from tests.integration.kube import condition, wait_for
from tests.integration.operator.jobs import Jobs
from tests.realnode.workloads import (
    CHECKPOINT,
    TRAINING_TIMEOUT,
    checkpointing,
    final_lines,
    jobs_in,
    node_directory,
    sample,
    started_log,
    wait_finished,
)

pytestmark = pytest.mark.usefixtures("installed_stack")

STEPS = 30
EVERY = 5


def _job(installed_stack: Path, namespace: str, name: str, directory: Path) -> dict[str, Any]:
    job = sample(installed_stack, "PyTorchJob", namespace)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {K.RESTART_SCOPE_ANNOTATION: "Gang"}
    job["spec"].setdefault("runPolicy", {})["backoffLimit"] = 1
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["restartPolicy"] = "OnFailure"
    return checkpointing(job, directory, steps=STEPS, every=EVERY, delay=0.3)


def _checkpointed(
    jobs: Jobs, clients: ClusterClients, name: str, attempt: str
) -> dict[str, dict[str, Any]]:
    """The pods of ``attempt`` once its master logged a checkpoint."""

    def look() -> dict[str, dict[str, Any]]:
        current = jobs.get("PyTorchJob", name) or {}
        failed = condition(current, "Failed") or {}
        assert failed.get("status") != "True", f"the job failed: {failed}"
        return {
            n: p
            for n, p in jobs.pods(name).items()
            if p["metadata"]["labels"].get(K.ATTEMPT_LABEL, "0") == attempt
            and not p["metadata"].get("deletionTimestamp")
        }

    def saved(pods: dict[str, dict[str, Any]]) -> bool:
        return len(pods) == 2 and bool(
            CHECKPOINT.search(started_log(clients, jobs.namespace, f"{name}-master-0"))
        )

    what = f"a checkpoint of {name}'s attempt {attempt}"
    return wait_for(look, saved, what=what, timeout=TRAINING_TIMEOUT)


def _gang_restarts(jobs: Jobs, name: str) -> list[str]:
    return [e["message"] for e in jobs.events(name) if e.get("reason") == "GangRestart"]


def _training_again(clients: ClusterClients, namespace: str, name: str, attempt: int) -> float:
    """Wait for the master of ``attempt`` to log a step after resuming; the time then."""
    wait_for(
        lambda: started_log(clients, namespace, f"{name}-master-0").partition(
            f"attempt={attempt} "
        )[2],
        lambda after: "\nstep=" in after,
        what=f"{name}'s attempt {attempt} to train again",
        timeout=TRAINING_TIMEOUT,
        interval=0.2,
    )
    return time.monotonic()


#: Trials the test runs (``benchmarks/drain_recovery.py --evictions`` asks for more, to
#: time them); each prints its figures.
TRIALS = int(os.environ.get("KUBETRAIN_EVICTION_TRIALS", "1"))


def test_a_killed_container_is_counted_and_an_eviction_beside_it_is_not(
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
) -> None:
    for trial in range(TRIALS):
        killed, evicted = _signals_once(
            f"signals-{trial}",
            installed_stack,
            real_node_cluster,
            real_node_clients,
            node_namespace,
        )
        print(
            f"signal trial {trial + 1}: SIGKILL -> training again {killed:.1f} s; "
            f"eviction -> training again {evicted:.1f} s"
        )


def _signals_once(
    name: str,
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
) -> tuple[float, float]:
    """One job through a kill and an eviction, checked; (seconds from each to the resumed
    master's first step)."""
    node = real_node_cluster.real_node
    assert node is not None
    jobs = jobs_in(real_node_clients, node_namespace)
    directory = node_directory("kubetrain-signals-")
    jobs.create(_job(installed_stack, node_namespace, name, directory))
    worker = f"{name}-worker-0"

    # 1. The worker's container killed by SIGKILL: the program's failure.
    pods = _checkpointed(jobs, real_node_clients, name, "0")
    status = pods[worker]["status"]["containerStatuses"][0]
    container_id = status["containerID"].removeprefix("containerd://")
    killed = time.monotonic()
    node.images.ctr("task", "kill", "--signal", "SIGKILL", container_id)
    first = wait_for(lambda: _gang_restarts(jobs, name), bool, what="the first GangRestart Event")
    assert "gang restarts used: 1 of 1" in first[0], first
    assert "infrastructure" not in first[0], first
    after_kill = _training_again(real_node_clients, node_namespace, name, 1) - killed

    # 2. A pod of the next attempt evicted: the infrastructure's.
    pods = _checkpointed(jobs, real_node_clients, name, "1")
    evicted = time.monotonic()
    real_node_clients.core_v1.create_namespaced_pod_eviction(
        worker, node_namespace, client.V1Eviction(metadata=client.V1ObjectMeta(name=worker))
    )
    both = wait_for(
        lambda: _gang_restarts(jobs, name),
        lambda m: len(m) >= 2,
        what="the second GangRestart Event",
    )
    second = next(m for m in both if "infrastructure" in m)
    assert "as attempt 2; infrastructure restarts used: 1 of 10" in second, second
    assert "the gang's restart limit untouched" in second, second
    after_eviction = _training_again(real_node_clients, node_namespace, name, 2) - evicted

    done = wait_finished(jobs, "PyTorchJob", name)
    log = started_log(real_node_clients, node_namespace, f"{name}-master-0")
    assert (condition(done, "Succeeded") or {}).get("status") == "True", (
        done["status"],
        log[-3000:],
    )
    assert done["status"]["gangRestart"]["attempt"] == 2, done["status"]
    assert done["status"]["gangRestart"]["infrastructure"] == 1, done["status"]
    # The last attempt resumed from a checkpoint and both ranks ended on the same weights.
    assert re.search(r"resume step=\d+ .* attempt=2 reason=EvictionByEvictionAPI", log), log
    digests = final_lines(log) | final_lines(started_log(real_node_clients, node_namespace, worker))
    assert sorted(digests) == [0, 1] and len(set(digests.values())) == 1, digests
    shutil.rmtree(directory, ignore_errors=True)
    return after_kill, after_eviction
