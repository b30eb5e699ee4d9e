"""Training for real: the ``local`` stack's sample jobs, submitted as users submit them,
run as pods on the real node under the env the operator gives them, and end on the
pods' real exit codes.

- PyTorchJob: Master + Worker rendezvous through the Master's Service (gloo) and end
  with one parameter digest.
- TFJob: two workers form a MultiWorkerMirroredStrategy group from the operator's
  ``TF_CONFIG`` and end with one digest.
- MPIJob: the launcher runs ``mpirun`` over SSH to the workers (hostfile of headless
  Service hostnames, the operator's SSH Secret) with the Horovod image.
- Failures: a script's exit code and an OOMKilled container reach the job's status.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

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
) -> dict[str, dict[str, Any]]:
    """Submit ``job``, wait until it Succeeded; its pods, all on the real node."""
    jobs = jobs_in(clients, namespace)
    kind, name = job["kind"], job["metadata"]["name"]
    jobs.create(job)
    done = wait_finished(jobs, kind, name)
    pods = jobs.pods(name)
    failed = condition(done, "Failed")
    assert not failed or failed["status"] != "True", (
        f"{kind} {name} failed: {failed}\n"
        + "\n".join(f"--- {p}\n{pod_log(clients, namespace, p)[-3000:]}" for p in pods)
    )
    return pods


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
    pods = _run_to_success(real_node_clients, node_namespace, job)
    _on_real_node(pods, node_name)
    digests: dict[int, str] = {}
    for pod in pods:
        assert terminated(pods[pod]).get("exitCode") == 0, pods[pod]["status"]
        digests.update(final_lines(pod_log(real_node_clients, node_namespace, pod)))
    assert sorted(digests) == [0, 1], digests
    assert len(set(digests.values())) == 1, f"ranks disagree: {digests}"


def test_mpijob_launcher_reaches_workers_over_ssh(
    installed_stack: Path, real_node_clients: ClusterClients, node_namespace: str, node_name: str
) -> None:
    job = sample(installed_stack, "MPIJob", node_namespace)
    name = job["metadata"]["name"]
    pods = _run_to_success(real_node_clients, node_namespace, job)
    _on_real_node(pods, node_name)
    launcher = next(p for p in pods if p.endswith("-launcher") or "launcher" in p)
    log = pod_log(real_node_clients, node_namespace, launcher)
    digests = final_lines(log)
    assert sorted(digests) == [0, 1], log[-3000:]
    assert len(set(digests.values())) == 1, f"ranks disagree: {digests}"
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
