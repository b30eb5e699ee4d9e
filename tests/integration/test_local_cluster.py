"""The local control plane itself: real components, the fake nodes, and the fake pod
lifecycle that kwok provides in place of kubelets (cluster/stages)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from cluster.fake_pods import EXIT_CODE_ANNOTATION, make_pod_exit
from cluster.local import LocalCluster
from cluster.tools import Versions
from cluster.topology import GPU_RESOURCE, POOL_LABEL
from tests.integration.kube import (
    apply,
    condition,
    exists,
    list_objects,
    listening_addresses,
    pod_dict,
    read,
    wait_for,
)

GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def pod_manifest(
    name: str,
    *,
    restart_policy: str = "Never",
    gpus: int = 0,
    tolerate_gpu_taint: bool = False,
    containers: tuple[str, ...] = ("main",),
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "100m"}}
    if gpus:
        resources = {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {"cpu": "1"}}
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [
            {"name": c, "image": "registry.example/trainer:1", "resources": resources}
            for c in containers
        ],
    }
    if tolerate_gpu_taint:
        spec["tolerations"] = [GPU_TOLERATION]
    metadata: dict[str, Any] = {"name": name}
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def wait_for_phase(dyn: DynamicClient, namespace: str, name: str, phase: str) -> dict[str, Any]:
    return wait_for(
        lambda: pod_dict(dyn, namespace, name),
        lambda pod: pod.get("status", {}).get("phase") == phase,
        what=f"pod {namespace}/{name} to reach phase {phase}",
    )


def test_api_server_reports_the_pinned_version(api_client: client.ApiClient) -> None:
    info = client.VersionApi(api_client).get_code()
    assert info.git_version == Versions.pinned().kubernetes, info


def test_components_listen_on_loopback_only(local_cluster: LocalCluster) -> None:
    server = local_cluster.server_url()
    assert server.startswith("https://127.0.0.1:"), server
    listening = listening_addresses(set(local_cluster.pids().values()))
    assert listening, "found no listening sockets of the control-plane processes"
    exposed = sorted(addr for addr in listening if not ipaddress.ip_address(addr).is_loopback)
    assert exposed == [], f"control-plane processes listen on non-loopback addresses: {exposed}"


def test_nodes_match_the_default_topology(local_cluster: LocalCluster, dyn: DynamicClient) -> None:
    nodes = {node["metadata"]["name"]: node for node in list_objects(dyn, "v1", "Node")}
    assert sorted(nodes) == sorted(local_cluster.topology.node_names())
    for name, node in nodes.items():
        ready = condition(node, "Ready") or {}
        assert ready.get("status") == "True", f"node {name} is not Ready: {node['status']}"
    by_pool: dict[str, list[dict[str, Any]]] = {}
    for node in nodes.values():
        by_pool.setdefault(node["metadata"]["labels"][POOL_LABEL], []).append(node)
    assert {pool: len(members) for pool, members in by_pool.items()} == {"cpu": 2, "gpu": 4}
    label = local_cluster.topology.topology_label
    for node in by_pool["gpu"]:
        labels = node["metadata"]["labels"]
        assert node["status"]["allocatable"][GPU_RESOURCE] == "8", node["status"]
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["nvidia.com/gpu.count"] == "8"
        taints = [(t["key"], t["effect"]) for t in node["spec"]["taints"]]
        assert taints == [(GPU_RESOURCE, "NoSchedule")]
    blocks = sorted(node["metadata"]["labels"][label] for node in by_pool["gpu"])
    assert blocks == ["block-0", "block-0", "block-1", "block-1"]
    for node in by_pool["cpu"]:
        assert GPU_RESOURCE not in node["status"]["allocatable"]
        assert not node["spec"].get("taints")


def test_gpu_pod_is_scheduled_on_a_gpu_node_and_runs(dyn: DynamicClient, namespace: str) -> None:
    apply(dyn, pod_manifest("trainer", gpus=8, tolerate_gpu_taint=True), namespace=namespace)
    pod = wait_for_phase(dyn, namespace, "trainer", "Running")
    node = read(dyn, "v1", "Node", pod["spec"]["nodeName"])
    assert node["metadata"]["labels"][POOL_LABEL] == "gpu"
    assert (condition(pod, "Ready") or {}).get("status") == "True", pod["status"]
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] is True and "running" in status["state"], status
    pod_ip = ipaddress.ip_address(pod["status"]["podIP"])
    assert pod_ip in ipaddress.ip_network(node["spec"]["podCIDR"]), (pod_ip, node["spec"])


def test_gpu_pod_without_toleration_stays_unschedulable(
    core_v1: client.CoreV1Api, dyn: DynamicClient, namespace: str
) -> None:
    apply(dyn, pod_manifest("no-toleration", gpus=1), namespace=namespace)
    pod = wait_for(
        lambda: pod_dict(dyn, namespace, "no-toleration"),
        lambda p: (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable",
        what="the scheduler to report the pod Unschedulable",
    )
    message = (condition(pod, "PodScheduled") or {}).get("message", "")
    assert "untolerated taint" in message and GPU_RESOURCE in message, message
    assert "nodeName" not in pod["spec"]


def test_more_gpus_than_a_node_has_is_unschedulable(
    core_v1: client.CoreV1Api, dyn: DynamicClient, namespace: str
) -> None:
    apply(dyn, pod_manifest("too-big", gpus=9, tolerate_gpu_taint=True), namespace=namespace)
    pod = wait_for(
        lambda: pod_dict(dyn, namespace, "too-big"),
        lambda p: (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable",
        what="the scheduler to report the pod Unschedulable",
    )
    message = (condition(pod, "PodScheduled") or {}).get("message", "")
    assert f"Insufficient {GPU_RESOURCE}" in message, message


@pytest.mark.parametrize(
    ("exit_code", "reason", "message", "phase", "expected_reason"),
    [
        pytest.param(0, None, None, "Succeeded", "Completed", id="exit-0-succeeds"),
        pytest.param(1, None, None, "Failed", "Error", id="exit-1-fails-with-error"),
        pytest.param(137, "OOMKilled", "out of memory", "Failed", "OOMKilled", id="oom-killed"),
    ],
)
def test_annotation_ends_a_never_restarting_pod(
    core_v1: client.CoreV1Api,
    dyn: DynamicClient,
    namespace: str,
    exit_code: int,
    reason: str | None,
    message: str | None,
    phase: str,
    expected_reason: str,
) -> None:
    apply(dyn, pod_manifest("worker", containers=("main", "sidecar")), namespace=namespace)
    wait_for_phase(dyn, namespace, "worker", "Running")
    make_pod_exit(core_v1, namespace, "worker", exit_code, reason, message)
    pod = wait_for_phase(dyn, namespace, "worker", phase)
    statuses = pod["status"]["containerStatuses"]
    assert [s["name"] for s in statuses] == ["main", "sidecar"]
    for status in statuses:
        terminated = status["state"].get("terminated")
        assert terminated is not None, status
        assert (terminated["exitCode"], terminated["reason"]) == (exit_code, expected_reason)
        assert terminated.get("message") == message
        assert status["ready"] is False
    assert (condition(pod, "Ready") or {}).get("status") == "False"


@pytest.mark.parametrize(
    ("restart_policy", "exit_code"),
    [
        pytest.param("Always", 0, id="always-exit-0"),
        pytest.param("Always", 2, id="always-exit-2"),
        pytest.param("OnFailure", 143, id="onfailure-exit-143"),
    ],
)
def test_annotation_restarts_a_restarting_pod_in_place(
    core_v1: client.CoreV1Api,
    dyn: DynamicClient,
    namespace: str,
    restart_policy: str,
    exit_code: int,
) -> None:
    apply(dyn, pod_manifest("server", restart_policy=restart_policy), namespace=namespace)
    wait_for_phase(dyn, namespace, "server", "Running")
    for attempt in (1, 2):
        make_pod_exit(core_v1, namespace, "server", exit_code)
        pod = wait_for(
            lambda: pod_dict(dyn, namespace, "server"),
            _restarted(attempt),
            what=f"restart number {attempt}",
        )
        status = pod["status"]["containerStatuses"][0]
        assert pod["status"]["phase"] == "Running"
        assert "running" in status["state"], status
        assert status["lastState"]["terminated"]["exitCode"] == exit_code, status
        assert EXIT_CODE_ANNOTATION not in (pod["metadata"].get("annotations") or {})


def _restarted(count: int) -> Callable[[dict[str, Any]], bool]:
    def done(pod: dict[str, Any]) -> bool:
        statuses = pod.get("status", {}).get("containerStatuses") or [{}]
        return bool(statuses[0].get("restartCount") == count)

    return done


def test_onfailure_pod_exiting_zero_succeeds(
    core_v1: client.CoreV1Api, dyn: DynamicClient, namespace: str
) -> None:
    apply(dyn, pod_manifest("once", restart_policy="OnFailure"), namespace=namespace)
    wait_for_phase(dyn, namespace, "once", "Running")
    make_pod_exit(core_v1, namespace, "once", 0)
    pod = wait_for_phase(dyn, namespace, "once", "Succeeded")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_deleted_pod_goes_away(
    core_v1: client.CoreV1Api, dyn: DynamicClient, namespace: str
) -> None:
    apply(dyn, pod_manifest("doomed"), namespace=namespace)
    wait_for_phase(dyn, namespace, "doomed", "Running")
    core_v1.delete_namespaced_pod("doomed", namespace)
    wait_for(
        lambda: exists(dyn, "v1", "Pod", "doomed", namespace),
        lambda found: not found,
        what="the deleted pod to disappear",
    )


def job_manifest(name: str, *, backoff_limit: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.example/launcher:1"}],
                }
            },
        },
    }


def _job_pod(dyn: DynamicClient, namespace: str, job: str) -> dict[str, Any]:
    pods = wait_for(
        lambda: list_objects(
            dyn, "v1", "Pod", namespace=namespace, label_selector=f"job-name={job}"
        ),
        lambda items: len(items) == 1 and items[0].get("status", {}).get("phase") == "Running",
        what=f"the one pod of Job {job} to run",
    )
    return pods[0]


@pytest.mark.parametrize(
    ("exit_code", "job_condition", "job_reason"),
    [
        pytest.param(0, "Complete", "CompletionsReached", id="complete"),
        pytest.param(3, "Failed", "BackoffLimitExceeded", id="failed"),
    ],
)
def test_job_controller_sees_fake_pod_outcome(
    core_v1: client.CoreV1Api,
    dyn: DynamicClient,
    namespace: str,
    exit_code: int,
    job_condition: str,
    job_reason: str,
) -> None:
    apply(dyn, job_manifest("launcher"), namespace=namespace)
    pod = _job_pod(dyn, namespace, "launcher")
    make_pod_exit(core_v1, namespace, pod["metadata"]["name"], exit_code)
    job = wait_for(
        lambda: read(dyn, "batch/v1", "Job", "launcher", namespace),
        lambda j: (condition(j, job_condition) or {}).get("status") == "True",
        what=f"Job launcher to be {job_condition}",
    )
    assert (condition(job, job_condition) or {}).get("reason") == job_reason, job["status"]


def test_pods_owned_by_a_custom_resource_follow_the_same_lifecycle(
    core_v1: client.CoreV1Api,
    dyn: DynamicClient,
    namespace: str,
    installed_crds: list[dict[str, Any]],
) -> None:
    job = apply(
        dyn,
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "owner"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "pytorch", "image": "registry.example/pt:1"}
                                ]
                            }
                        },
                    }
                }
            },
        },
        namespace=namespace,
    )
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "owner",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    apply(dyn, pod_manifest("owner-master-0", owner=owner), namespace=namespace)
    wait_for_phase(dyn, namespace, "owner-master-0", "Running")
    make_pod_exit(core_v1, namespace, "owner-master-0", 137, "OOMKilled")
    pod = wait_for_phase(dyn, namespace, "owner-master-0", "Failed")
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")
    # The garbage collector (kube-controller-manager) removes the pod with its owner.
    dyn.resources.get(api_version="kubeflow.org/v1", kind="PyTorchJob").delete(
        name="owner", namespace=namespace, body={"propagationPolicy": "Foreground"}
    )
    wait_for(
        lambda: exists(dyn, "v1", "Pod", "owner-master-0", namespace),
        lambda found: not found,
        what="the garbage collector to delete the pod of the deleted PyTorchJob",
    )
