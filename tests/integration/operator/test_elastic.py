"""Elastic PyTorchJob on the local control plane: upstream's elastic examples unchanged,
the HPA the operator makes for one with ``metrics`` (as upstream's hpa.go), and a scale
through the job's scale subresource (``kubectl scale``, what an HPA does too): Workers
added and removed while the others run on, with the Event and the Running message
saying what changed and why. HPA decisions from real metrics are
``tests/integration/test_metrics.py``'s."""

from __future__ import annotations

from typing import Any

from cluster.local import LocalCluster
from kubetrain.controller.policies.scaling import BY_SPEC
from kubetrain.manifest import parse_yaml
from tests.conftest import REPO_ROOT
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs

KIND = "PyTorchJob"
ELASTIC = (
    REPO_ROOT / "tests" / "data" / "upstream" / "training-operator-v1.9.0" / "pytorch" / "elastic"
)


def upstream(example: str) -> dict[str, Any]:
    """Upstream's example as published (the request's namespace decides)."""
    wire: dict[str, Any] = parse_yaml((ELASTIC / example / f"{example}.yaml").read_text())
    wire["metadata"].pop("namespace", None)
    return wire


def hpa(local_cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    found = local_cluster.kubectl(
        "get", "hpa", name, "-n", namespace, "-o", "json", "--ignore-not-found"
    ).stdout
    return parse_yaml(found) if found.strip() else None


def uids(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: p["metadata"]["uid"] for name, p in pods.items()}


def test_upstreams_imagenet_example_gets_its_hpa_and_scales_without_restarting_workers(
    operator: RunningOperator, jobs: Jobs, local_cluster: LocalCluster, namespace: str
) -> None:
    job = upstream("imagenet")
    name = job["metadata"]["name"]
    created = jobs.create(job)
    workers = {f"{name}-worker-{i}" for i in range(2)}
    first = uids(jobs.wait_running(name, workers))

    made = wait_for(lambda: hpa(local_cluster, namespace, name), bool, what=f"the HPA of {name}")
    assert made is not None
    assert made["spec"]["scaleTargetRef"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": KIND,
        "name": name,
    }
    assert (made["spec"]["minReplicas"], made["spec"]["maxReplicas"]) == (1, 3)
    assert made["spec"]["metrics"] == job["spec"]["elasticPolicy"]["metrics"]
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        KIND,
        created["metadata"]["uid"],
        True,
    )
    # upstream's elastic environment on every Worker.
    pod = jobs.pods(name)[f"{name}-worker-1"]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
    assert env["PET_NNODES"] == "1:3"
    assert env["PET_RDZV_ENDPOINT"] == f"{name}-worker-0:23456"
    assert env["PET_RDZV_BACKEND"] == "c10d" and env["PET_MAX_RESTARTS"] == "100"
    jobs.wait_condition(KIND, name, "Running")

    # Up, through the scale subresource (the HPA's own path).
    local_cluster.kubectl("scale", "pytorchjob", name, "-n", namespace, "--replicas=3")
    bigger = workers | {f"{name}-worker-2"}
    after_up = uids(jobs.wait_running(name, bigger))
    assert {n: after_up[n] for n in workers} == first, "a running Worker was recreated"
    event = jobs.wait_event(name, "ScaledUp")
    # The HPA measures nothing here (no metrics API) and never decided this: the scale is
    # the spec's (test_metrics.py has the HPA's own).
    assert event["message"] == f"2 -> 3 workers ({BY_SPEC})"
    running = condition(jobs.get(KIND, name), "Running") or {}
    assert running.get("status") == "True"
    assert running.get("message", "").endswith(f"ScaledUp: 2 -> 3 workers ({BY_SPEC})")

    # Down to one: the surplus Workers and their Services go, Worker 0 runs on.
    local_cluster.kubectl("scale", "pytorchjob", name, "-n", namespace, "--replicas=1")
    left = jobs.wait_pods(
        name,
        lambda pods: set(pods) == {f"{name}-worker-0"},
        what="Workers 1 and 2 deleted",
    )
    assert uids(left) == {f"{name}-worker-0": first[f"{name}-worker-0"]}
    # The Services go in the same reconcile, after the pods: seen a moment later.
    wait_for(
        lambda: set(jobs.services(name)),
        lambda services: services == {f"{name}-worker-0"},
        what="the Services of Workers 1 and 2 deleted",
    )
    assert jobs.wait_event(name, "ScaledDown")["message"] == f"3 -> 1 workers ({BY_SPEC})"
    status = jobs.wait(
        KIND,
        name,
        lambda j: (
            ((j or {}).get("status") or {})
            .get("replicaStatuses", {})
            .get("Worker", {})
            .get("active")
            == 1
        ),
        what="Worker active 1",
    )
    assert status is not None and jobs.state(KIND, name) == "Running"

    # Suspended: the HPA goes with the pods (upstream's hpa.go), and comes back on resume.
    jobs.patch(KIND, name, {"spec": {"runPolicy": {"suspend": True}}})
    wait_for(lambda: hpa(local_cluster, namespace, name), lambda h: h is None, what="HPA deleted")
    jobs.patch(KIND, name, {"spec": {"runPolicy": {"suspend": False}}})
    wait_for(lambda: hpa(local_cluster, namespace, name), bool, what="HPA made again")


def test_upstreams_echo_example_has_no_hpa_and_a_kubectl_scale_down_says_so(
    operator: RunningOperator, jobs: Jobs, local_cluster: LocalCluster, namespace: str
) -> None:
    job = upstream("echo")
    name = job["metadata"]["name"]
    jobs.create(job)
    count = int(job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])
    workers = {f"{name}-worker-{i}" for i in range(count)}
    jobs.wait_running(name, workers)
    jobs.wait_condition(KIND, name, "Running")
    assert hpa(local_cluster, namespace, name) is None
    low = int(job["spec"]["elasticPolicy"]["minReplicas"])
    assert low < count
    local_cluster.kubectl("scale", "pytorchjob", name, "-n", namespace, f"--replicas={low}")
    jobs.wait_running(name, {f"{name}-worker-{i}" for i in range(low)})
    event = jobs.wait_event(name, "ScaledDown")
    assert (
        event["message"] == f"{count} -> {low} workers (the job's spec: kubectl scale or an edit)"
    )
