"""GpuNodePool against a real API server: the node tuner's objects and the namespace's
NetworkPolicies are accepted, the scheduler puts one tuner pod on each GPU node (and none
on CPU nodes), the tuner labels a real Node with a token bound to one of its pods, under
the pool's ClusterRole (patch on nodes, nothing more: not even get) and admission policy
(its own node, its own keys), and the preflight MPIJob is accepted by the CRD."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cdk8s
import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from cluster.local import LocalCluster
from cluster.topology import POOL_LABEL as CLUSTER_POOL_LABEL
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.network_policy import (
    Egress,
    TrainingNetwork,
    TrainingNetworkPolicy,
    TrainingNetworkPolicyProps,
)
from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps
from kubetrain.constructs.node_tuning import TUNER_APP
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.types import Image
from kubetrain.controller.kube import KubeApi
from kubetrain.node_tuner import DETAIL_ANNOTATION, LABEL, main
from tests.integration.credentials import request_token, write_token_kubeconfig
from tests.integration.kube import apply, list_objects, read, wait_for

H100 = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def pool_objects(
    namespace: str, dyn: DynamicClient, api_client: client.ApiClient
) -> Iterator[tuple[GpuNodePool, list[dict[str, Any]]]]:
    """A pool's objects applied server-side in the test namespace, with the NetworkPolicies
    the pool gives a namespace it creates; cluster-scoped ones get a unique pool name and
    are deleted afterwards."""
    chart = cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)
    pool = GpuNodePool(
        chart,
        "Pool",
        GpuNodePoolProps(
            name=f"it-{secrets.token_hex(3)}",
            profile=NcclProfile.infiniband(hcas=("ibp",)),
            tuner_image=Image("ghcr.io/kubetrain/operator:0.1.0"),
            gpu_product=H100,
            namespace=namespace,
            create_namespace=False,
            preflight_image=Image("ghcr.io/kubetrain/nccl-tests:2.21.5"),
        ),
    )
    TrainingNetworkPolicy(
        chart,
        "NetworkPolicy",
        TrainingNetworkPolicyProps(
            namespace=namespace,
            network=TrainingNetwork(egress=(Egress(cidrs=("52.216.0.0/15",)),)),
            api_clients={"app.kubernetes.io/name": TUNER_APP},
        ),
    )
    objs = manifests(chart)
    applied = []
    try:
        for obj in objs:
            if obj["kind"] != "MPIJob":
                apply(dyn, obj)
                applied.append(obj)
        yield pool, objs
    finally:
        rbac = client.RbacAuthorizationV1Api(api_client)
        admission = client.AdmissionregistrationV1Api(api_client)
        for obj in applied:
            name = obj["metadata"]["name"]
            try:
                if obj["kind"] == "ClusterRole":
                    rbac.delete_cluster_role(name)
                elif obj["kind"] == "ClusterRoleBinding":
                    rbac.delete_cluster_role_binding(name)
                elif obj["kind"] == "PriorityClass":
                    client.SchedulingV1Api(api_client).delete_priority_class(name)
                elif obj["kind"] == "ValidatingAdmissionPolicy":
                    admission.delete_validating_admission_policy(name)
                elif obj["kind"] == "ValidatingAdmissionPolicyBinding":
                    admission.delete_validating_admission_policy_binding(name)
            except ApiException as err:
                if err.status != 404:
                    raise


def test_tuner_pods_land_on_every_gpu_node_and_no_cpu_node(
    pool_objects: tuple[GpuNodePool, list[dict[str, Any]]], dyn: DynamicClient, namespace: str
) -> None:
    gpu_nodes = sorted(
        n["metadata"]["name"]
        for n in list_objects(dyn, "v1", "Node")
        if n["metadata"]["labels"].get("nvidia.com/gpu.product") == H100
    )
    assert gpu_nodes
    pool, _ = pool_objects
    selector = f"app.kubernetes.io/instance={pool.props.name}"
    pods = wait_for(
        lambda: list_objects(dyn, "v1", "Pod", namespace=namespace, label_selector=selector),
        lambda items: sorted(p.get("spec", {}).get("nodeName", "") for p in items) == gpu_nodes,
        what=f"one node-tuner pod on each GPU node {gpu_nodes}",
    )
    for pod in pods:
        node = read(dyn, "v1", "Node", pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][CLUSTER_POOL_LABEL] == "gpu"


def _tuner_api(
    kubeconfig: Path, dyn: DynamicClient, pool: GpuNodePool, namespace: str, tmp_path: Path
) -> tuple[client.ApiClient, str]:
    """A client holding the token the kubelet would give one of the pool's tuner pods:
    from the TokenRequest API, bound to that pod (so it carries the pod's node name),
    loaded from a kubeconfig by the official loader. Returns it and the node."""
    selector = f"app.kubernetes.io/instance={pool.props.name}"
    pods = wait_for(
        lambda: [
            p
            for p in list_objects(dyn, "v1", "Pod", namespace=namespace, label_selector=selector)
            if p.get("spec", {}).get("nodeName")
        ],
        bool,
        what="a scheduled node-tuner pod",
    )
    pod = pods[0]
    admin = KubeApi.connect(str(kubeconfig))
    try:
        token = request_token(
            admin,
            namespace,
            pool.tuner_name,
            bound_to={
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        )
    finally:
        admin.close()
    path = write_token_kubeconfig(kubeconfig, token, tmp_path / "tuner.kubeconfig")
    api: client.ApiClient = config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]
    return api, str(pod["spec"]["nodeName"])


def test_tuner_labels_its_node_as_its_service_account_with_patch_only(
    pool_objects: tuple[GpuNodePool, list[dict[str, Any]]],
    local_cluster: LocalCluster,
    core_v1: client.CoreV1Api,
    dyn: DynamicClient,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool, _ = pool_objects
    api, node = _tuner_api(local_cluster.kubeconfig, dyn, pool, namespace, tmp_path)
    as_tuner = client.CoreV1Api(api)
    other = next(
        n["metadata"]["name"]
        for n in list_objects(dyn, "v1", "Node")
        if n["metadata"]["labels"].get("nvidia.com/gpu.product") == H100
        and n["metadata"]["name"] != node
    )
    host, proc, sys_dir = tmp_path / "host", tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "limits").write_text(
        "Max locked memory         8388608              8388608              bytes     \n"
    )
    (sys_dir / "module/nvidia_peermem").mkdir(parents=True)
    monkeypatch.setenv("NODE_NAME", node)
    argv = [
        f"--host-root={host}",
        f"--proc-root={proc}",
        f"--sys-root={sys_dir}",
        "--require-peermem",
        "--once",
    ]

    def answer(call: Any) -> str:
        try:
            call()
        except ApiException as err:
            return f"{err.status} {err.body}"
        return "allowed"

    try:
        # The RBAC objects were just applied; the authorizer's cache may lag a moment.
        wait_for(
            lambda: answer(lambda: as_tuner.patch_node(node, {"metadata": {"labels": {}}})),
            lambda text: text == "allowed",
            what=f"{pool.tuner_user} to be allowed to patch node {node}",
        )
        assert main([*argv, "--phase=check"], api=as_tuner) == 1
        meta = read(dyn, "v1", "Node", node)["metadata"]
        assert meta["labels"][LABEL] == "memlock-limited.removeipc-enabled"
        detail = meta["annotations"][DETAIL_ANNOTATION]
        assert "check=memlock status=FAIL (memlock-limited)" in detail

        def same_round_keeps_the_version() -> bool:
            before = read(dyn, "v1", "Node", node)["metadata"]["resourceVersion"]
            assert main([*argv, "--phase=check"], api=as_tuner) == 1
            return bool(read(dyn, "v1", "Node", node)["metadata"]["resourceVersion"] == before)

        # The same round again: the patch is sent, the server stores nothing new (kwok's
        # node heartbeat may land in between, once in a long while: three tries).
        assert any(same_round_keeps_the_version() for _ in range(3))
        (proc / "self" / "limits").write_text(
            "Max locked memory         unlimited            unlimited            bytes     \n"
        )
        logind = host / "etc/systemd/logind.conf.d"
        logind.mkdir(parents=True)
        (logind / "kubetrain.conf").write_text("[Login]\nRemoveIPC=no\n")
        assert main([*argv, "--phase=check"], api=as_tuner) == 0
        assert read(dyn, "v1", "Node", node)["metadata"]["labels"][LABEL] == "ok"
        # Patch is all it may do: no get (not even of its own node), list, or pods.
        for call in (
            lambda: as_tuner.read_node(node),
            as_tuner.list_node,
            lambda: as_tuner.list_namespaced_pod(namespace),
        ):
            assert answer(call).startswith("403 "), answer(call)
        # RBAC allows patching any node; the pool's admission policy narrows it to this
        # node and to kubetrain.dev/ keys.
        refusals: dict[str, tuple[str, dict[str, Any]]] = {
            "another node": (other, {"metadata": {"labels": {LABEL: "ok"}}}),
            "a foreign label": (node, {"metadata": {"labels": {"team": "mine"}}}),
            "a foreign annotation": (node, {"metadata": {"annotations": {"note": "x"}}}),
            "a taint": (
                node,
                {"spec": {"taints": [{"key": "x", "value": "y", "effect": "NoSchedule"}]}},
            ),
        }

        def refusal(target: str, patch: dict[str, Any]) -> str:
            return answer(lambda: as_tuner.patch_node(target, patch))

        # Admission policies take effect a moment after they are created.
        wait_for(
            lambda: refusal(*refusals["another node"]),
            lambda text: "node tuner may" in text,
            what="the node-patch policy to be in force",
        )
        for what, (target, patch) in refusals.items():
            text = refusal(target, patch)
            assert text.startswith("403 ") and "node tuner may" in text, (what, text)
    finally:
        api.close()  # type: ignore[no-untyped-call]
        core_v1.patch_node(
            node, {"metadata": {"labels": {LABEL: None}, "annotations": {DETAIL_ANNOTATION: None}}}
        )


def test_namespace_network_policies_are_accepted_as_synthesized(
    pool_objects: tuple[GpuNodePool, list[dict[str, Any]]], dyn: DynamicClient, namespace: str
) -> None:
    _, objs = pool_objects
    ours = {o["metadata"]["name"]: o for o in objs if o["kind"] == "NetworkPolicy"}
    stored = {
        p["metadata"]["name"]: p
        for p in list_objects(dyn, "networking.k8s.io/v1", "NetworkPolicy", namespace=namespace)
    }
    assert (
        sorted(stored)
        == sorted(ours)
        == [
            "kubetrain-api-server",
            "kubetrain-default-deny",
            "kubetrain-training",
        ]
    )
    for name, obj in ours.items():
        # The server keeps the empty selectors (every pod) and adds nothing to the rules.
        assert stored[name]["spec"] == obj["spec"], name


def test_preflight_mpijob_is_accepted_by_the_crd(
    pool_objects: tuple[GpuNodePool, list[dict[str, Any]]],
    installed_crds: list[dict[str, Any]],
    dyn: DynamicClient,
) -> None:
    _, objs = pool_objects
    (job,) = [o for o in objs if o["kind"] == "MPIJob"]
    stored = apply(dyn, job, dry_run=True)
    worker = stored["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["rdma/ib"] in (1, "1")
    assert worker["volumes"][0]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
