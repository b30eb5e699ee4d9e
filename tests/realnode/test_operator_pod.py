"""The operator as deployed: the stack's own Deployment (its image, ServiceAccount with the
token the kubelet projects, security context, probes) running on the real node.

- Both replicas run on the real node as uid 65532 with a read-only root filesystem and
  load their credentials the in-cluster way (the projected token, ``KUBERNETES_SERVICE_*``).
- ``/healthz``, ``/readyz`` and ``/metrics`` answer on the pod IP, read from the other
  replica's pod (pod-to-pod traffic, as Prometheus and the kubelet reach them).
- Deleting the leader's pod hands the Lease to another replica, which then reconciles.
- Labelled as upstream Trainer's controller (``found_as_trainer``), the operator is found by
  the Kubeflow MCP server (``kubeflow-mcp``, unmodified, asked over MCP as an AI agent asks
  it), which returns its pod's logs and events.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.clusters import ClusterClients
from tests.integration.kube import list_objects, wait_for
from tests.realnode.conftest import OPERATOR_REPLICAS
from tests.realnode.workloads import (
    OPERATOR_NAMESPACE,
    jobs_in,
    sample,
)

LEASE = "kubetrain-operator"
ROOT = Path(__file__).resolve().parents[2]


def _operator_pods(clients: ClusterClients) -> dict[str, dict[str, Any]]:
    found = list_objects(clients.dyn, "v1", "Pod", namespace=OPERATOR_NAMESPACE)
    return {
        p["metadata"]["name"]: p
        for p in found
        if p["metadata"].get("deletionTimestamp") is None
        and (p.get("status") or {}).get("phase") == "Running"
    }


def _exec(clients: ClusterClients, pod: str, code: str) -> str:
    """Run a Python snippet in the operator pod with ``kubectl exec``; its stdout."""
    done = clients.cluster.kubectl(
        "exec", "-n", OPERATOR_NAMESPACE, pod, "-c", "operator", "--", "python", "-c", code
    )
    return str(done.stdout)


def _holder(clients: ClusterClients) -> str:
    lease = clients.cluster.kubectl(
        "get",
        "lease",
        "-n",
        OPERATOR_NAMESPACE,
        LEASE,
        "-o",
        "jsonpath={.spec.holderIdentity}",
        check=False,
    )
    return str(lease.stdout).strip()


def test_operator_runs_as_the_deployment_describes(
    installed_stack: Path, real_node_clients: ClusterClients, node_name: str
) -> None:
    pods = _operator_pods(real_node_clients)
    assert len(pods) == OPERATOR_REPLICAS, sorted(pods)
    for name, pod in pods.items():
        assert pod["spec"]["nodeName"] == node_name, (name, pod["spec"].get("nodeName"))
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready.get("Ready") == "True", (name, ready)
        facts = _exec(
            real_node_clients,
            name,
            "import os, pathlib\n"
            "sa = pathlib.Path('/var/run/secrets/kubernetes.io/serviceaccount')\n"
            "try:\n    open('/probe', 'w')\n    ro = 'writable'\n"
            "except OSError as e:\n    ro = type(e).__name__\n"
            "print(os.getuid(), os.getgid(), ro, (sa / 'token').is_file(),"
            " (sa / 'ca.crt').is_file(), bool(os.environ.get('KUBERNETES_SERVICE_HOST')))",
        ).split()
        assert facts == ["65532", "65532", "OSError", "True", "True", "True"], (name, facts)


def test_health_and_metrics_answer_on_the_pod_ip(
    installed_stack: Path, real_node_clients: ClusterClients
) -> None:
    pods = _operator_pods(real_node_clients)
    (asker, _), (_, target_pod) = sorted(pods.items())[:2]
    ip = target_pod["status"]["podIP"]
    fetched = _exec(
        real_node_clients,
        asker,
        "import urllib.request\n"
        f"for url in ('http://{ip}:8081/healthz', 'http://{ip}:8081/readyz',"
        f" 'http://{ip}:8080/metrics'):\n"
        "    with urllib.request.urlopen(url, timeout=5) as r:\n"
        "        body = r.read().decode()\n"
        "        print(url.rsplit('/', 1)[1], r.status, 'kubetrain_' in body)",
    ).splitlines()
    assert fetched == ["healthz 200 False", "readyz 200 False", "metrics 200 True"], fetched


def test_another_replica_takes_over_when_the_leader_pod_is_deleted(
    installed_stack: Path, real_node_clients: ClusterClients, node_namespace: str
) -> None:
    pods = _operator_pods(real_node_clients)
    holder = wait_for(lambda: _holder(real_node_clients), bool, what="a leader to hold the Lease")
    leader = next((name for name in pods if holder.startswith(name)), None)
    assert leader is not None, f"Lease holder {holder!r} is none of the pods {sorted(pods)}"
    real_node_clients.core_v1.delete_namespaced_pod(leader, OPERATOR_NAMESPACE)
    # The leader releases the Lease on SIGTERM; the standby or the Deployment's replacement
    # pod, whichever campaigns first (both poll), takes it. Neither is warmer: a standby
    # starts its informers only once it leads.
    new_holder = wait_for(
        lambda: _holder(real_node_clients),
        lambda h: bool(h) and not h.startswith(leader),
        what=f"another replica to take the Lease from {leader}",
        timeout=120,
        interval=0.5,
    )
    replicas = list_objects(real_node_clients.dyn, "v1", "Pod", namespace=OPERATOR_NAMESPACE)
    assert new_holder.rsplit("_", 1)[0] in {p["metadata"]["name"] for p in replicas}, new_holder
    # The new leader reconciles: a job submitted now gets its pods.
    job = sample(installed_stack, "PyTorchJob", node_namespace)
    jobs = jobs_in(real_node_clients, node_namespace)
    jobs.create(job)
    name = job["metadata"]["name"]
    created = jobs.wait_pods(
        name, lambda found: len(found) == 2, what=f"{name}'s pods, from {new_holder}", timeout=60
    )
    assert {p.rsplit("-", 2)[-2] for p in created} == {"master", "worker"}, sorted(created)
    jobs.delete("PyTorchJob", name)
    # The Deployment replaces the deleted pod, which then stands by.
    wait_for(
        lambda: _operator_pods(real_node_clients),
        lambda found: len(found) == OPERATOR_REPLICAS and leader not in found,
        what="the Deployment to replace the deleted leader pod",
        timeout=180,
        interval=1,
    )


def _ask_mcp_server(clients: ClusterClients, *views: str, **env: str) -> dict[str, Any]:
    """The Kubeflow MCP server's ``inspect_controller`` result for each view
    (``tests/mcp/inspect_controller.py``, in the MCP virtualenv)."""
    python = os.environ.get("KUBETRAIN_MCP_PYTHON") or str(ROOT / ".venv-mcp/bin/python")
    assert Path(python).exists(), f"the MCP virtualenv is missing ({python}): make mcp-venv"
    # Only what ``env`` sets of the server's settings (none: its defaults).
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KUBEFLOW_MCP_")}
    environment |= {"KUBECONFIG": str(clients.cluster.kubeconfig), **env}
    done = subprocess.run(
        [python, "-m", "tests.mcp.inspect_controller", *views],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_the_kubeflow_mcp_server_finds_the_operator_and_returns_its_logs_and_events(
    installed_stack: Path, real_node_clients: ClusterClients
) -> None:
    """Tools that find Trainer's controller by upstream's labels (name trainer, component
    manager) find kubetrain's operator labelled so (``found_as_trainer``, docs/operator.md).
    Pointed at the operator's namespace by its own setting, the MCP server returns one of
    the operator pods' logs (what kubectl reads of it) and the kubelet's events for it;
    left to upstream's namespaces, it says where it looked and what to set."""
    found = _ask_mcp_server(
        real_node_clients, "logs", "events", KUBEFLOW_MCP_CONTROLLER_NAMESPACE=OPERATOR_NAMESPACE
    )
    pods = _operator_pods(real_node_clients)
    logs, events = found["logs"], found["events"]
    assert logs["success"] is True, logs
    assert logs["data"]["pod"] in pods and logs["data"]["namespace"] == OPERATOR_NAMESPACE
    assert logs["data"]["phase"] == "Running"
    # The pod's own log, as kubectl reads it after: the MCP server's lines are among them,
    # and they are the operator's (the leader logs "starting", a standby "waiting for
    # leadership": the server takes the first pod it lists, either one).
    served = logs["data"]["logs"].splitlines()
    pod_log = real_node_clients.cluster.kubectl(
        "logs", "-n", OPERATOR_NAMESPACE, logs["data"]["pod"], "-c", "operator"
    )
    assert served and set(served) <= set(str(pod_log.stdout).splitlines()), served[-20:]
    assert any('"logger": "kubetrain.operator"' in line for line in served), served[-20:]
    assert events["success"] is True, events
    assert events["data"]["pod"] == logs["data"]["pod"]
    reasons = {event["reason"] for event in events["data"]["events"]}
    assert {"Scheduled", "Started"} <= reasons, reasons
    default = _ask_mcp_server(real_node_clients, "logs")["logs"]
    assert default["success"] is False
    assert default["details"]["searched_namespace"] == "kubeflow, kubeflow-system", default
    assert "KUBEFLOW_MCP_CONTROLLER_NAMESPACE" in default["details"]["hint"]
