"""Training for real: the ``local`` stack's sample jobs, submitted as users submit them,
run as pods on the real node under the env the operator gives them, and end on the
pods' real exit codes.

- PyTorchJob: Master + Worker rendezvous through the Master's Service (gloo) and end
  with one parameter digest.
- TFJob: two workers form a MultiWorkerMirroredStrategy group from the operator's
  ``TF_CONFIG`` and end with one digest.
- MPIJob: the launcher runs ``mpirun`` over SSH to the workers (hostfile of headless
  Service hostnames, the operator's SSH Secret) with the Horovod image.
- Progress: every sample, annotated to report, reports its last step from rank 0's pod
  through the progress server (the MPIJob's rank 0 on a worker, the variables forwarded
  by the launcher's ``mpirun``).
- Failures: a script's exit code and an OOMKilled container reach the job's status.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import keys as K
from tests.clusters import ClusterClients
from tests.integration.kube import condition
from tests.realnode.workloads import (
    TRAINING_TIMEOUT,
    final_lines,
    jobs_in,
    pod_log,
    sample,
    terminated,
    wait_finished,
)

pytestmark = pytest.mark.usefixtures("installed_stack")


def _run_to_success(
    clients: ClusterClients, namespace: str, job: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Submit ``job``, reporting its progress, wait until it Succeeded; the job as it
    ended and its pods, all on the real node."""
    jobs = jobs_in(clients, namespace)
    kind, name = job["kind"], job["metadata"]["name"]
    job["metadata"].setdefault("annotations", {})[K.REPORT_PROGRESS_ANNOTATION] = "true"
    jobs.create(job)
    done = wait_finished(jobs, kind, name)
    pods = jobs.pods(name)
    failed = condition(done, "Failed")
    assert not failed or failed["status"] != "True", (
        f"{kind} {name} failed: {failed}\n"
        + "\n".join(f"--- {p}\n{pod_log(clients, namespace, p)[-3000:]}" for p in pods)
    )
    return done, pods


def _reported_last_step(done: dict[str, Any], log: str, reporter: str) -> None:
    """Rank 0 (in pod ``reporter``) reported the final step its log names."""
    final = re.search(r"final rank=0 step=(\d+)", log)
    assert final, log[-3000:]
    progress = done.get("status", {}).get("progress") or {}
    assert progress.get("step") == int(final[1]), progress
    assert progress.get("pod") == reporter, progress


def _on_real_node(pods: dict[str, dict[str, Any]], node: str) -> None:
    where = {name: p["spec"].get("nodeName") for name, p in pods.items()}
    assert set(where.values()) == {node}, f"pods not all on the real node {node}: {where}"


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob"])
def test_ranks_train_to_one_digest(
    kind: str,
    installed_stack: Path,
    real_node_clients: ClusterClients,
    node_namespace: str,
    node_name: str,
) -> None:
    # Each rank draws its own batches, so equal digests mean the gradients were averaged:
    # the ranks found each other from the operator's env (MASTER_ADDR, TF_CONFIG).
    job = sample(installed_stack, kind, node_namespace)
    done, pods = _run_to_success(real_node_clients, node_namespace, job)
    _on_real_node(pods, node_name)
    digests: dict[int, str] = {}
    logs = {pod: pod_log(real_node_clients, node_namespace, pod) for pod in pods}
    for pod in pods:
        assert terminated(pods[pod]).get("exitCode") == 0, pods[pod]["status"]
        digests.update(final_lines(logs[pod]))
    assert sorted(digests) == [0, 1], digests
    assert len(set(digests.values())) == 1, f"ranks disagree: {digests}"
    rank0 = next(pod for pod in pods if 0 in final_lines(logs[pod]))
    _reported_last_step(done, logs[rank0], rank0)


def test_mpijob_launcher_reaches_workers_over_ssh(
    installed_stack: Path, real_node_clients: ClusterClients, node_namespace: str, node_name: str
) -> None:
    job = sample(installed_stack, "MPIJob", node_namespace)
    name = job["metadata"]["name"]
    done, pods = _run_to_success(real_node_clients, node_namespace, job)
    _on_real_node(pods, node_name)
    launcher = next(p for p in pods if p.endswith("-launcher") or "launcher" in p)
    log = pod_log(real_node_clients, node_namespace, launcher)
    digests = final_lines(log)
    assert sorted(digests) == [0, 1], log[-3000:]
    assert len(set(digests.values())) == 1, f"ranks disagree: {digests}"
    # Rank 0 ran on the first worker and reported with that pod's token: the launcher's
    # mpirun forwarded the progress variables over SSH.
    _reported_last_step(done, log, f"{name}-worker-0")
    # The ranks ran on the workers, reached by their headless-Service hostnames.
    hostfile = jobs_in(real_node_clients, node_namespace).config_maps(name)
    hosts = "\n".join(str(cm.get("data", {}).get("hostfile", "")) for cm in hostfile.values())
    assert f"{name}-worker-0.{name}" in hosts, hosts


def _run_to_failure(
    installed_stack: Path, clients: ClusterClients, namespace: str, name: str, **container: Any
) -> tuple[str, dict[str, Any]]:
    """Submit the PyTorchJob sample cut to one Master that runs ``container``'s changes,
    with no retry; wait until it Failed. The Failed condition's message and the pod."""
    job = sample(installed_stack, "PyTorchJob", namespace)
    job["metadata"]["name"] = name
    master = copy.deepcopy(job["spec"]["pytorchReplicaSpecs"]["Master"])
    master["restartPolicy"] = "Never"
    master["template"]["spec"]["containers"][0].update(container)
    job["spec"]["pytorchReplicaSpecs"] = {"Master": master}
    jobs = jobs_in(clients, namespace)
    jobs.create(job)
    done = jobs.wait_condition("PyTorchJob", name, "Failed", timeout=TRAINING_TIMEOUT)
    pods = jobs.pods(name)
    assert len(pods) == 1, sorted(pods)
    return str((condition(done, "Failed") or {}).get("message")), next(iter(pods.values()))


def test_failing_script_fails_the_job_with_its_exit_code(
    installed_stack: Path, real_node_clients: ClusterClients, node_namespace: str
) -> None:
    message, pod = _run_to_failure(
        installed_stack,
        real_node_clients,
        node_namespace,
        "exits-3",
        command=["python", "-c", "import sys; print('giving up', flush=True); sys.exit(3)"],
        args=[],
    )
    state = terminated(pod)
    assert (state.get("exitCode"), state.get("reason")) == (3, "Error"), state
    assert "exit code 3" in message, message
    assert "giving up" in pod_log(real_node_clients, node_namespace, pod["metadata"]["name"])


def test_oom_killed_container_is_reported(
    installed_stack: Path, real_node_clients: ClusterClients, node_namespace: str
) -> None:
    limits = {"memory": "64Mi"}
    message, pod = _run_to_failure(
        installed_stack,
        real_node_clients,
        node_namespace,
        "oom",
        command=["python", "-c", "chunks = [bytearray(16 << 20) for _ in range(64)]"],
        args=[],
        resources={"requests": {"cpu": "100m", **limits}, "limits": limits},
    )
    state = terminated(pod)
    assert (state.get("exitCode"), state.get("reason")) == (137, "OOMKilled"), state
    assert "OOMKilled" in message or "out of memory" in message, message
