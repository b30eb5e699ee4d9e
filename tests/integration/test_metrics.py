"""The resource metrics API on the local control plane, and HPA decisions driven by it.

Against ``metrics_cluster`` (``cluster/metrics.py``): metrics-server, run by kwokctl
behind the API server's aggregation layer, scrapes the ``/metrics/resource`` endpoints
kwok serves for its fake nodes, where pods use what kwok's ``ResourceUsage`` and
``ClusterResourceUsage`` objects declare. kube-controller-manager's HPA controller reads
the result through ``metrics.k8s.io``, as it would on a real cluster.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.local import LocalCluster
from kubetrain.controller.config import OperatorConfig
from tests.builders import jobs as builders
from tests.clusters import ClusterClients
from tests.integration.kube import (
    apply,
    install_crds,
    list_objects,
    listening_addresses,
    read,
    wait_for,
)
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import IMAGE, Jobs

KWOK_API = "kwok.x-k8s.io/v1alpha1"
METRICS = ("metrics.k8s.io", "v1beta1")
METRICS_API = "v1beta1.metrics.k8s.io"
#: What each pod requests: the HPA's CPU utilisation is usage over this.
CPU_REQUEST_MILLI = 100
#: A usage a metric must match within (a CPU rate is cumulative seconds over a scrape
#: window, whose ends are read a few milliseconds apart).
CPU_TOLERANCE_MILLI = 5


def _pod_metrics(api: client.ApiClient, namespace: str, pod: str) -> dict[str, Any] | None:
    """GET /apis/metrics.k8s.io/v1beta1/namespaces/<namespace>/pods/<pod>; None while it
    answers 404 (a pod's metrics come after metrics-server has scraped it twice)."""
    return _metrics(lambda m: m.get_namespaced_custom_object(*METRICS, namespace, "pods", pod), api)


def _node_metrics(api: client.ApiClient, node: str) -> dict[str, Any] | None:
    """GET /apis/metrics.k8s.io/v1beta1/nodes/<node> (None while it answers 404)."""
    return _metrics(lambda m: m.get_cluster_custom_object(*METRICS, "nodes", node), api)


def _metrics(get: Any, api: client.ApiClient) -> dict[str, Any] | None:
    try:
        data = get(client.CustomObjectsApi(api))
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    assert isinstance(data, dict), data
    return data


def _nano(quantity: str) -> float:
    """A CPU quantity (``150005187n``, ``150m``, ``1``) in cores."""
    for suffix, scale in (("n", 1e-9), ("u", 1e-6), ("m", 1e-3)):
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * scale
    return float(quantity)


def _milli(quantity: str) -> float:
    return _nano(quantity) * 1000


def test_metrics_server_runs_beside_the_control_plane_on_loopback_only(
    metrics_cluster: LocalCluster, metrics_clients: ClusterClients
) -> None:
    pids = metrics_cluster.pids()
    assert "metrics-server" in pids, pids
    listening = listening_addresses({pids["metrics-server"]})
    assert listening and all(ipaddress.ip_address(a).is_loopback for a in listening), listening
    service = read(metrics_clients.dyn, "apiregistration.k8s.io/v1", "APIService", METRICS_API)
    available = [c for c in service["status"]["conditions"] if c["type"] == "Available"]
    assert [c["status"] for c in available] == ["True"], service["status"]


def test_metrics_api_serves_the_usage_a_resource_usage_declares(
    metrics_clients: ClusterClients, metrics_namespace: str
) -> None:
    ns = metrics_namespace
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "busy", "namespace": ns},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "resources": {"requests": {"cpu": f"{CPU_REQUEST_MILLI}m"}},
                }
            ]
        },
    }
    usage = {
        "apiVersion": KWOK_API,
        "kind": "ResourceUsage",
        "metadata": {"name": "busy", "namespace": ns},
        "spec": {"usages": [{"usage": {"cpu": {"value": "150m"}, "memory": {"value": "40Mi"}}}]},
    }
    apply(metrics_clients.dyn, usage)
    apply(metrics_clients.dyn, pod)

    metrics = wait_for(
        lambda: _pod_metrics(metrics_clients.api_client, ns, "busy"),
        lambda m: m is not None and bool(m.get("containers")),
        what=f"PodMetrics of {ns}/busy from metrics.k8s.io",
        timeout=90,
    )
    assert metrics is not None
    (container,) = metrics["containers"]
    assert container["name"] == "main"
    assert abs(_milli(container["usage"]["cpu"]) - 150) <= CPU_TOLERANCE_MILLI, container
    assert container["usage"]["memory"] == "40Mi", container

    # The pod's node reports at least the pod's usage (kwok sums its pods).
    node = read(metrics_clients.dyn, "v1", "Pod", "busy", ns)["spec"]["nodeName"]
    node_metrics = wait_for(
        lambda: _node_metrics(metrics_clients.api_client, node),
        lambda m: m is not None,
        what=f"NodeMetrics of {node}",
        timeout=60,
    )
    assert node_metrics is not None
    assert _milli(node_metrics["usage"]["cpu"]) >= 150 - CPU_TOLERANCE_MILLI, node_metrics


# An HPA over an elastic PyTorchJob, the kubetrain operator adding and removing Workers --


@pytest.fixture
def metrics_operator(
    metrics_cluster: LocalCluster, metrics_clients: ClusterClients, metrics_namespace: str
) -> Iterator[RunningOperator]:
    """kubetrain's operator in this process, watching the test's namespace on the metrics
    control plane (the typed API's CRDs installed there first)."""
    install_crds(metrics_clients.dyn)
    config = OperatorConfig(
        namespaces=(metrics_namespace,), workers=2, kube_api_qps=100, kube_api_burst=200
    )
    running = RunningOperator(config, metrics_cluster.kubeconfig).start()
    try:
        yield running
    finally:
        running.stop()


def _elastic_job(name: str) -> dict[str, Any]:
    """Upstream's elastic shape: Workers only, 1 to 3 of them, an HPA on CPU at 50%."""

    def pods(_replica_type: str, container: str) -> dict[str, Any]:
        return builders.template(container, image=IMAGE, cpu=f"{CPU_REQUEST_MILLI}m")

    return builders.pytorch_job(
        name=name,
        master=False,
        workers=1,
        pods=pods,
        elasticPolicy={
            "minReplicas": 1,
            "maxReplicas": 3,
            "rdzvBackend": "c10d",
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 50},
                    },
                }
            ],
        },
    )


def _load(ns: str, cpu: str) -> dict[str, Any]:
    """Every pod of namespace ``ns`` uses ``cpu`` (kwok's ClusterResourceUsage)."""
    return {
        "apiVersion": KWOK_API,
        "kind": "ClusterResourceUsage",
        "metadata": {"name": f"load-{ns}"},
        "spec": {
            "selector": {"matchNamespaces": [ns]},
            "usages": [{"usage": {"cpu": {"value": cpu}, "memory": {"value": "64Mi"}}}],
        },
    }


def _workers(jobs: Jobs, job: str) -> dict[str, str]:
    """The job's Worker pods that are not being deleted, by name, with their phase."""
    return {
        name: str((pod.get("status") or {}).get("phase"))
        for name, pod in jobs.pods(job).items()
        if not pod["metadata"].get("deletionTimestamp")
    }


def _utilization(status: dict[str, Any]) -> int | None:
    """The CPU utilisation (percent of the request) an HPA's status reports, if any."""
    for metric in status.get("currentMetrics") or []:
        current = (metric.get("resource") or {}).get("current") or {}
        if metric.get("type") == "Resource" and current.get("averageUtilization") is not None:
            return int(current["averageUtilization"])
    return None


def _hpa(clients: ClusterClients, ns: str, name: str) -> dict[str, Any] | None:
    """The HPA ``name``, or None while there is none."""
    found = list_objects(clients.dyn, "autoscaling/v2", "HorizontalPodAutoscaler", namespace=ns)
    return next((h for h in found if h["metadata"]["name"] == name), None)


def _rescales(clients: ClusterClients, ns: str, hpa: str) -> list[str]:
    events = list_objects(clients.dyn, "v1", "Event", namespace=ns)
    return [
        str(e.get("message"))
        for e in events
        if e.get("involvedObject", {}).get("name") == hpa and e.get("reason") == "SuccessfulRescale"
    ]


def test_hpa_scales_an_elastic_pytorchjob_up_and_down_with_its_cpu_load(
    metrics_clients: ClusterClients,
    metrics_namespace: str,
    metrics_operator: RunningOperator,
) -> None:
    ns = metrics_namespace
    name = "elastic"
    jobs = Jobs(metrics_clients.api_client, ns)
    load = apply(metrics_clients.dyn, _load(ns, "10m"))
    try:
        job = jobs.create(_elastic_job(name))
        wait_for(
            lambda: _workers(jobs, name),
            lambda w: w == {f"{name}-worker-0": "Running"},
            what=f"{name}'s one Worker Running",
        )
        # The operator's HPA (upstream's hpa.go): the job's bounds, its metrics verbatim.
        hpa = wait_for(
            lambda: _hpa(metrics_clients, ns, name),
            bool,
            what=f"the operator to make {name}'s HPA",
        )
        assert hpa is not None
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": name,
        }
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 3)
        assert hpa["spec"]["metrics"] == job["spec"]["elasticPolicy"]["metrics"]

        # Under the target (10m of 100m: 10%), the HPA keeps the one Worker.
        status = wait_for(
            lambda: read(
                metrics_clients.dyn, "autoscaling/v2", "HorizontalPodAutoscaler", name, ns
            ).get("status", {}),
            lambda s: _utilization(s) is not None,
            what=f"HPA {name} to read the Workers' CPU utilisation",
            timeout=90,
        )
        utilization = _utilization(status)
        assert utilization is not None and abs(utilization - 10) <= 2, status
        assert status["desiredReplicas"] == 1, status

        # 150m of 100m (150% > 50%): 1 * 150 / 50 = 3 Workers, the maximum.
        apply(metrics_clients.dyn, _load(ns, "150m"))
        wait_for(
            lambda: _workers(jobs, name),
            lambda w: w == {f"{name}-worker-{i}": "Running" for i in range(3)},
            what=f"{name} scaled up to 3 Running Workers",
            timeout=120,
        )
        scaled = jobs.get("PyTorchJob", name)
        assert scaled is not None
        assert scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
        ups = _rescales(metrics_clients, ns, name)
        assert any("New size: 3" in m and "above target" in m for m in ups), ups
        # The operator says what changed and why, from the HPA's own measurement.
        up = jobs.wait_event(name, "ScaledUp")["message"]
        assert up.startswith("1 -> 3 workers (HPA: cpu ") and up.endswith("% > 50%)"), up

        # Back to 10m: 3 * 10 / 50 rounds up to 1 once the downscale window has passed.
        apply(metrics_clients.dyn, _load(ns, "10m"))
        wait_for(
            lambda: _workers(jobs, name),
            lambda w: w == {f"{name}-worker-0": "Running"},
            what=f"{name} scaled down to its one Worker",
            timeout=180,
        )
        shrunk = jobs.get("PyTorchJob", name)
        assert shrunk is not None
        assert shrunk["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
        downs = _rescales(metrics_clients, ns, name)
        assert any("New size: 1" in m and "below target" in m for m in downs), downs
        down = jobs.wait_event(name, "ScaledDown")["message"]
        assert down.startswith("3 -> 1 workers (HPA: cpu ") and down.endswith("% < 50%)"), down
    finally:
        resource = metrics_clients.dyn.resources.get(
            api_version=KWOK_API, kind="ClusterResourceUsage"
        )
        resource.delete(name=load["metadata"]["name"])
