"""Every stack delivered by the real Argo CD: each stack's synthesized app-of-apps,
committed to a git repository and synced by Argo CD's controller, ends Synced and
Healthy, then goes again when its root is deleted.

It runs on Kueue's control plane, because the GPU stacks' ``queues`` chart needs Kueue's
CRDs and webhooks. Pods there run on kwok's nodes. Each GPU stack's sample jobs need
nodes of its pool, so the test adds kwok nodes the way that pool's real nodes look: the
labels its samples select, the labels their pod affinity's topology key reads (one block
for all of them), the GPU taint, and the capacity they request (GPUs, InfiniBand or EFA
devices, hugepages). The monitoring charts need the Prometheus Operator's CRDs, which the
test installs, as that operator's installation would. The operator's pods and the
samples' pods are kwok's here, so the operator runs as a process with the flags and the
ServiceAccount its Deployment gives it; the real-node tier runs the ``local`` stack's
operator as real pods (``tests/delivery/test_argocd.py``).

Why a second Argo CD install in a run: this one proves what only Kueue's control plane
can show (every stack, Kueue's queues and their webhooks included, Synced and Healthy);
the other proves what only a real node can (the operator's pods delivered, upgraded in
place and handing over the Lease). Neither control plane can serve the other's test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.argocd import NAMESPACE as ARGOCD_NAMESPACE
from cluster.argocd import LocalArgoCd
from cluster.gitops_repo import GitOpsRepo, app_names, health_config
from cluster.kueue import Kueue
from cluster.tools import prometheus_operator_crds
from cluster.topology import GPU_TAINT, GpuSpec, NodePool, Topology
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.stack import Stack, load_stacks
from tests.clusters import ClusterClients
from tests.integration.argocd_apps import app_state, applications, synced_and_healthy
from tests.integration.kube import list_objects, wait_for
from tests.integration.operator.process import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
STACKS = load_stacks(root=ROOT)
#: Resources a pool node has beside what its pods ask: room for the operator's launchers.
NODE_CPU, NODE_MEMORY = "192", "2048Gi"
#: kwok nodes of the cluster before the test adds any (its default topology).
FIRST_ADDED_NODE = 16
SYNC_TIMEOUT = 300.0


@pytest.fixture(scope="module")
def argocd(
    kueue: Kueue, kueue_clients: ClusterClients, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalArgoCd, GitOpsRepo]]:
    cluster = kueue.cluster
    for crd in prometheus_operator_crds():
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
    repo = GitOpsRepo(tmp_path_factory.mktemp("gitops"))
    # The health checks are the same in every stack's version: take the first's.
    first = repo.commit_version(repo.stack(STACKS["local"]))
    argocd = LocalArgoCd(cluster)
    argocd.start(config=health_config(first))
    try:
        yield argocd, repo
    finally:
        argocd.delete_applications()
        argocd.stop()
        cluster.kubectl("delete", "namespace", ARGOCD_NAMESPACE, "--ignore-not-found")


def pool_nodes(stack: Stack) -> list[dict[str, Any]]:
    """kwok nodes standing for the stack's GPU pool, enough for its samples and its
    preflight job: what their pods select and request, in one topology block."""
    pods: list[dict[str, Any]] = []
    for chart in render_charts(stack, only=("gpu-nodes", "samples")):
        for obj in chart.objects:
            specs = obj.get("spec", {})
            for key in ("pytorchReplicaSpecs", "mpiReplicaSpecs", "tfReplicaSpecs"):
                for replica in specs.get(key, {}).values():
                    pods += [replica["template"]["spec"]] * int(replica.get("replicas", 1))
    gpu_pods = [p for p in pods if "nvidia.com/gpu" in _limits(p)]
    if not gpu_pods:
        return []
    labels: dict[str, str] = {}
    extended: dict[str, str] = {}
    for pod in gpu_pods:
        labels.update(pod.get("nodeSelector") or {})
        affinity = (pod.get("affinity") or {}).get("podAffinity") or {}
        terms = list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution", []))
        terms += [
            t["podAffinityTerm"]
            for t in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])
        ]
        for term in terms:
            labels[term["topologyKey"]] = "block-0"
        for name, value in _limits(pod).items():
            if name not in ("cpu", "memory", "nvidia.com/gpu"):
                extended[name] = str(value)
    count = max(len(gpu_pods), 4)
    gpus = GpuSpec(count=8, nodes_per_block=count)
    pool = NodePool(
        name=stack.name.replace(".", "-")[:40],
        count=count,
        cpu=NODE_CPU,
        memory=NODE_MEMORY,
        gpus=gpus,
        labels=labels,
        taints=(GPU_TAINT,),
        extended=extended,
    )
    return Topology(pools=(pool,)).nodes(first=FIRST_ADDED_NODE)


def _deployment(clients: ClusterClients, stack: Stack) -> dict[str, Any] | None:
    found = list_objects(clients.dyn, "apps/v1", "Deployment", namespace=stack.operator.namespace)
    return next((d for d in found if d["metadata"]["name"] == stack.operator.name), None)


def _limits(pod: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for container in pod["containers"]:
        resources = container.get("resources") or {}
        found.update(resources.get("requests") or {})
        found.update(resources.get("limits") or {})
    return found


@pytest.mark.parametrize("name", sorted(STACKS))
def test_every_stack_syncs_to_synced_and_healthy(
    name: str,
    argocd: tuple[LocalArgoCd, GitOpsRepo],
    kueue_clients: ClusterClients,
    tmp_path: Path,
) -> None:
    """The stack's root applied: every Application Synced and Healthy (waves in order);
    the root deleted: every Application gone, the CRDs kept."""
    localargo, repo = argocd
    cluster = localargo.cluster
    stack = repo.stack(STACKS[name])
    version_dir = repo.commit_version(stack)
    names = app_names(version_dir)
    nodes = pool_nodes(stack)
    if nodes:
        cluster.kubectl(
            "create",
            "-f",
            "-",
            input=yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}),
        )
        cluster.kubectl(
            "wait",
            "--for=condition=Ready",
            "node",
            *(n["metadata"]["name"] for n in nodes),
            "--timeout=60s",
        )
    operator: OperatorProcess | None = None
    try:
        start = time.monotonic()
        cluster.kubectl("apply", "-f", str(version_dir / "argocd" / "root-application.yaml"))
        # The operator's pods are kwok's: it runs here as its Deployment describes (flags,
        # ServiceAccount), once Argo CD has made the Deployment, so the stack's jobs
        # (samples, the GPU pools' preflight) run and report their health.
        deployment = wait_for(
            lambda: _deployment(kueue_clients, stack),
            lambda d: d is not None,
            what=f"{name}'s operator Deployment",
            timeout=SYNC_TIMEOUT,
            interval=1.0,
        )
        assert deployment is not None
        operator = OperatorProcess.as_deployed(
            cluster.kubeconfig, deployment, tmp_path / "operator.log"
        ).start()
        apps = wait_for(
            lambda: applications(kueue_clients.dyn),
            synced_and_healthy(names),
            what=f"every Application of {name} Synced and Healthy",
            timeout=SYNC_TIMEOUT,
            interval=1.0,
        )
        took = time.monotonic() - start
        print(
            f"\nArgo CD: {name} {stack.version}, {len(names)} Applications Synced and "
            f"Healthy {took:.0f} s after the root was applied"
        )
        assert all(app_state(apps[n]) == ("Synced", "Healthy") for n in names)
        cluster.kubectl(
            "-n",
            ARGOCD_NAMESPACE,
            "delete",
            "applications.argoproj.io",
            names[0],
            "--wait=true",
            "--timeout=180s",
        )
        wait_for(
            lambda: set(applications(kueue_clients.dyn)) & set(names),
            lambda left: not left,
            what=f"{name}'s Applications gone with the root",
            timeout=SYNC_TIMEOUT,
        )
        crds = cluster.kubectl("get", "crd", "-o", "name").stdout
        assert "pytorchjobs.kubeflow.org" in crds, "deleting the root deleted a CRD"
        # The namespaces the stack created go too (the other tests on this control plane
        # make some of the same names).
        namespaces = [
            obj["metadata"]["name"]
            for chart in render_charts(stack)
            for obj in chart.objects
            if obj["kind"] == "Namespace"
        ]
        for ns in namespaces:
            cluster.kubectl("wait", "--for=delete", f"namespace/{ns}", "--timeout=120s")
    finally:
        if operator is not None:
            operator.stop()
        if nodes:
            cluster.kubectl(
                "delete", "node", "--ignore-not-found", *(n["metadata"]["name"] for n in nodes)
            )
