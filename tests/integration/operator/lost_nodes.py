"""Fake GPU nodes a test (or ``benchmarks/node_recovery.py``) can lose: a pool of kwok
nodes of its own per job, the job's pods pinned to it, and the three ways a node fails
(an unhealthy condition with the node cordoned, as a GPU health system does; the node's
kubelet gone, NotReady, its pods stuck Terminating; the Node deleted)."""

from __future__ import annotations

import copy
import functools
import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.fake_pods import KUBELET_GONE_ANNOTATION, lose_node
from cluster.topology import GPU_TAINT, GpuSpec, NodePool, Taint, Topology
from kubetrain.api import keys as K
from tests.integration.kube import wait_for
from tests.integration.operator.jobs import (
    Jobs,
    jax_job,
    mpi_job,
    paddle_job,
    pytorch_job,
    template,
    tf_job,
    torch_runtime,
    train_job,
    xgboost_job,
)

#: The label (and taint) that keeps a job's pods on its own nodes.
POOL_KEY = "kubetrain.dev/lost-node-test"
#: Ordinal of the first such node: clear of the cluster's own and of other tests' nodes.
FIRST_NODE = 200
#: The job annotations: act one second after a node is lost, and force-delete its pods.
FAST = {K.NODE_LOST_GRACE_ANNOTATION: "1", K.FORCE_DELETE_ANNOTATION: "true"}


def pool(name: str, index: int, count: int = 4) -> list[dict[str, Any]]:
    """``count`` fake 8-GPU nodes ``kwok-<name>-<i>`` that only pods of ``name`` tolerate."""
    nodes = NodePool(
        name=name,
        count=count,
        gpus=GpuSpec(count=8, nodes_per_block=count),
        labels={POOL_KEY: name},
        taints=(GPU_TAINT, Taint(key=POOL_KEY, value=name, effect="NoSchedule")),
    )
    return Topology(pools=(nodes,)).nodes(first=FIRST_NODE + index * count)


def pinned(obj: Any, name: str) -> Any:
    """``obj`` (a job or runtime) with every pod template pinned to pool ``name``."""
    obj = copy.deepcopy(obj)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            spec = node.get("spec")
            if isinstance(spec, dict) and "containers" in spec:
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), POOL_KEY: name}
                # The pool's taint, and the GPU taint for pods without GPUs (a PS).
                spec["tolerations"] = [
                    *(spec.get("tolerations") or []),
                    {"key": POOL_KEY, "operator": "Equal", "value": name, "effect": "NoSchedule"},
                    {"key": K.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
                ]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(obj)
    return obj


def every_kind(jobs: Jobs, prefix: str) -> dict[str, str]:
    """One job of each kind, its pods on its own pool, with :data:`FAST`: kind -> name
    (pool name = job name)."""
    made = {
        "PyTorchJob": pytorch_job(f"{prefix}-pt", workers=2),
        "TFJob": tf_job(f"{prefix}-tf", workers=1, ps=1),
        "MPIJob": mpi_job(f"{prefix}-mpi", workers=2),
        "XGBoostJob": xgboost_job(f"{prefix}-xgb", workers=1),
        "PaddleJob": paddle_job(f"{prefix}-pd", workers=2),
        "JAXJob": jax_job(f"{prefix}-jax", workers=2),
    }
    runtime = f"{prefix}-rt"
    trainjob = f"{prefix}-tj"
    jobs.custom.create_namespaced_custom_object(
        "trainer.kubeflow.org",
        "v1alpha1",
        jobs.namespace,
        "trainingruntimes",
        pinned(torch_runtime(runtime, jobs.namespace, template("node")), trainjob),
    )
    made["TrainJob"] = train_job(trainjob, runtime, nodes=2)
    names = {}
    for index, (kind, job) in enumerate(made.items()):
        name = job["metadata"]["name"]
        create_nodes(jobs.core, pool(name, index))
        job["metadata"].setdefault("annotations", {}).update(FAST)
        jobs.create(pinned(job, name) if kind != "TrainJob" else job)
        names[kind] = name
    return names


def _json(response: Any) -> dict[str, Any]:
    """The body of a call made with ``_preload_content=False``."""
    data: dict[str, Any] = json.loads(response.data)
    return data


def create_nodes(core: client.CoreV1Api, nodes: list[dict[str, Any]]) -> None:
    for node in nodes:
        core.create_node(node)  # type: ignore[arg-type]  # the client takes plain dicts too

    def ready(name: str) -> bool:
        status = _json(core.read_node_status(name, _preload_content=False))["status"]
        conds = status.get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    for node in nodes:
        name = node["metadata"]["name"]
        wait_for(functools.partial(ready, name), bool, what=f"fake node {name} to be Ready")


def stuck_pods(core: client.CoreV1Api, namespace: str) -> list[str]:
    """The namespace's pods on a node whose kubelet is gone (never confirmed deleted)."""
    found = _json(core.list_namespaced_pod(namespace, _preload_content=False))["items"]
    return [
        p["metadata"]["name"]
        for p in found
        if (p["metadata"].get("annotations") or {}).get(KUBELET_GONE_ANNOTATION)
    ]


def running(jobs: Jobs, name: str, attempt: int) -> dict[str, dict[str, Any]]:
    """The job's pods once all of attempt ``attempt`` (and no others) are Running."""

    def settled(pods: dict[str, dict[str, Any]]) -> bool:
        return bool(pods) and all(
            p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["labels"].get(K.ATTEMPT_LABEL, "0") == str(attempt)
            for p in pods.values()
        )

    def brief(pods: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str, bool, str]]:
        return {
            n: (
                p["metadata"]["labels"].get(K.ATTEMPT_LABEL, "-"),
                p["status"].get("phase", ""),
                bool(p["metadata"].get("deletionTimestamp")),
                p["spec"].get("nodeName", ""),
            )
            for n, p in pods.items()
        }

    try:
        return jobs.wait_pods(name, settled, what=f"{name}'s attempt {attempt}", timeout=90)
    except AssertionError:
        found = brief(jobs.pods(name))
        raise AssertionError(
            f"{name}'s attempt {attempt} not Running in 90 s: (attempt, phase, deleting, "
            f"node) of its pods: {found}"
        ) from None


def node_of(pods: dict[str, dict[str, Any]]) -> str:
    """The node of the job's first pod (by name)."""
    return str(pods[sorted(pods)[0]]["spec"]["nodeName"])


def make_unhealthy(core: client.CoreV1Api, node: str) -> None:
    """NVSentinel's way: a GPU condition on the node, and the node cordoned."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {
        "type": "SysLogsXIDError",
        "status": "True",
        "reason": "Xid79",
        "message": "GPU has fallen off the bus (fake)",
        "lastTransitionTime": now,
        "lastHeartbeatTime": now,
    }
    core.patch_node_status(node, {"status": {"conditions": [condition]}})
    core.patch_node(node, {"spec": {"unschedulable": True}})


def make_lost(core: client.CoreV1Api, node: str) -> None:
    """The node's kubelet gone: NotReady, its pods stuck Terminating; and cordoned, as
    the node lifecycle controller's not-ready taint soon does."""
    lose_node(core, node)
    core.patch_node(node, {"spec": {"unschedulable": True}})


def delete_node(core: client.CoreV1Api, node: str) -> None:
    core.delete_node(node)


SIGNALS: tuple[tuple[str, Callable[[client.CoreV1Api, str], None], str], ...] = (
    ("unhealthy GPU", make_unhealthy, "condition SysLogsXIDError=True on node {node}"),
    ("NotReady, pods stuck Terminating", make_lost, "node {node} NotReady for"),
    ("node deleted", delete_node, "node {node} was deleted"),
)


def remove_pools(jobs: Jobs, names: list[str]) -> None:
    """Delete the jobs' nodes, and any of their pods still held Terminating."""
    for pod in stuck_pods(jobs.core, jobs.namespace):
        try:
            jobs.core.delete_namespaced_pod(pod, jobs.namespace, grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                raise
    nodes = _json(jobs.core.list_node(label_selector=POOL_KEY, _preload_content=False))
    for node in nodes["items"]:
        if node["metadata"]["labels"].get(POOL_KEY) in names:
            jobs.core.delete_node(node["metadata"]["name"])
