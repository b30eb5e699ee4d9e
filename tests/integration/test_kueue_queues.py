"""The queues chart of every GPU stack against the real Kueue: its objects apply
server-side (Kueue's CRD schemas and CEL rules, its conversion and validating webhooks)
and re-apply unchanged, its ClusterQueues become Active; a job built by the PyTorchJob
construct with ``queue=`` is admitted on the pool's flavor, which hands it the pool's node
selector and toleration; a runtime's ``queue=`` refuses unqueued TrainJobs, unless Kueue
queues them itself in a namespace with a ``default`` LocalQueue.

These objects need Kueue running (its CRDs convert v1beta2 through Kueue's webhook), so
they are applied here, on Kueue's control plane, rather than on the shared one."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubetrain.api import keys as K
from kubetrain.api.kinds import TRAINJOB
from kubetrain.constructs import App, Chart
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.types import Image
from kubetrain.gitops.render import RenderedChart, render_charts
from kubetrain.gitops.stack import load_stacks
from tests.clusters import ClusterClients
from tests.conftest import REPO_ROOT
from tests.integration.kube import (
    api_error_message,
    apply,
    comparable,
    condition,
    diff_paths,
    exists,
    get,
    list_objects,
    read,
    resource_for,
    wait_for,
    wait_until_gone,
    wait_until_kueue_knows_the_runtime,
)

STACKS = load_stacks(root=REPO_ROOT)
GPU_STACKS = sorted(name for name, stack in STACKS.items() if stack.node_pools)
KUEUE = K.KUEUE_API_VERSION
TEAMS = ("team-a", "team-b")
# Deleted in this order: what points at a thing goes before it.
DELETE_ORDER = ("LocalQueue", "ClusterQueue", "ResourceFlavor", "WorkloadPriorityClass")


def charts_of(stack: str) -> dict[str, RenderedChart]:
    return {chart.name: chart for chart in render_charts(STACKS[stack])}


def _delete(dyn: DynamicClient, objs: list[dict[str, Any]]) -> None:
    ranked = sorted(
        objs,
        key=lambda o: DELETE_ORDER.index(o["kind"]) if o["kind"] in DELETE_ORDER else -1,
    )
    for obj in ranked:
        if obj["kind"] == "Namespace":
            continue  # the team namespaces stay for the module (see team_namespaces)
        resource = resource_for(dyn, obj)
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        try:
            resource.delete(name=obj["metadata"]["name"], namespace=namespace)
        except ApiException as err:
            if err.status != 404:
                raise
        wait_until_gone(dyn, obj, namespace)


@pytest.fixture(scope="module")
def team_namespaces(kueue_clients: ClusterClients) -> Iterator[None]:
    """The stacks' team namespaces are created by their queues charts and deleted after
    this module's tests (each test deletes its cluster-scoped objects itself)."""
    yield
    for team in TEAMS:
        try:
            kueue_clients.core_v1.delete_namespace(team)
        except ApiException as err:
            if err.status != 404:
                raise


@pytest.mark.parametrize("stack", GPU_STACKS)
def test_queues_chart_applies_to_the_real_kueue_and_reapplies_unchanged(
    stack: str, kueue_clients: ClusterClients, team_namespaces: None
) -> None:
    dyn = kueue_clients.dyn
    objects = charts_of(stack)["queues"].objects
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == [
        "ClusterQueue",
        "LocalQueue",
        "Namespace",
        "ResourceFlavor",
        "WorkloadPriorityClass",
    ]
    applied: list[dict[str, Any]] = []
    try:
        for original in objects:
            obj = copy.deepcopy(original)
            try:
                apply(dyn, obj)
            except ApiException as err:
                pytest.fail(
                    f"{stack}: server-side apply of {obj['kind']}/{obj['metadata']['name']} "
                    f"was rejected: {api_error_message(err)}",
                    pytrace=False,
                )
            applied.append(obj)
        changes = {
            f"{obj['kind']}/{obj['metadata']['name']}": diff
            for obj in applied
            if (
                diff := list(
                    diff_paths(comparable(get(dyn, obj)), comparable(apply(dyn, obj, dry_run=True)))
                )
            )
        }
        assert changes == {}, f"re-applying (server-side dry run) would change: {changes}"
        for team in TEAMS:
            queue = wait_for(
                lambda team=team: read(dyn, KUEUE, "ClusterQueue", team),  # type: ignore[misc]
                lambda cq: (condition(cq, "Active") or {}).get("status") == "True",
                what=f"{stack}: ClusterQueue {team} to be Active (its flavor exists)",
            )
            assert queue["spec"]["cohortName"] == STACKS[stack].node_pools[0].name
            local = wait_for(
                lambda team=team: read(dyn, KUEUE, "LocalQueue", "default", team),  # type: ignore[misc]
                lambda lq: (condition(lq, "Active") or {}).get("status") == "True",
                what=f"{stack}: LocalQueue {team}/default to be Active",
            )
            assert local["spec"]["clusterQueue"] == team
    finally:
        _delete(dyn, applied)


def _gpu_job(namespace: str) -> dict[str, Any]:
    app = App()
    chart = Chart(app, "job", disable_resource_name_hashes=True)
    PyTorchJob(
        chart,
        "Llm",
        PyTorchJobProps(
            image=Image("ghcr.io/kubetrain/pytorch-trainer:0.1.0"),
            namespace=namespace,
            gpus_per_node=8,
            workers=1,
            queue=K.KUEUE_DEFAULT_LOCAL_QUEUE,
        ),
    )
    (job,) = manifests(chart)
    return job


def _workload_of(dyn: DynamicClient, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    for workload in list_objects(dyn, KUEUE, "Workload", namespace=namespace):
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == kind and o["name"] == name for o in owners):
            return workload
    return None


def _trainjob(name: str, runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": TRAINJOB.api_version,
        "kind": TRAINJOB.kind,
        "metadata": {"name": name},
        # Kueue looks the runtime up by apiGroup and kind: without them its webhook
        # refuses the TrainJob ("unsupported runtime").
        "spec": {
            "runtimeRef": {
                "name": runtime,
                "apiGroup": TRAINJOB.group,
                "kind": "ClusterTrainingRuntime",
            }
        },
    }


def test_a_queued_job_and_a_queued_runtime_on_the_h100_stack(
    kueue_clients: ClusterClients, kueue_namespace: str, team_namespaces: None
) -> None:
    dyn = kueue_clients.dyn
    charts = charts_of("h100-infiniband")
    setup = [copy.deepcopy(o) for name in ("queues", "runtimes") for o in charts[name].objects]
    created: list[dict[str, Any]] = []
    try:
        for obj in setup:
            apply(dyn, obj)
        wait_for(
            lambda: read(dyn, KUEUE, "ClusterQueue", "team-a"),
            lambda cq: (condition(cq, "Active") or {}).get("status") == "True",
            what="ClusterQueue team-a to be Active",
        )

        # A PyTorchJob of the construct, queue="default", not bound to the pool: 2 pods
        # x 8 GPUs, team-a's nominal quota. Kueue creates it suspended, admits it on the
        # pool's flavor and resumes it with the flavor's node labels and tolerations.
        job = _gpu_job("team-a")
        assert job["metadata"]["labels"] == {K.KUEUE_QUEUE_NAME_LABEL: "default"}
        assert "tolerations" not in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        stored = resource_for(dyn, job).create(body=job, namespace="team-a").to_dict()
        created.append(job)
        assert stored["spec"]["runPolicy"]["suspend"] is True
        workload = wait_for(
            lambda: _workload_of(dyn, "team-a", "PyTorchJob", "llm"),
            lambda wl: wl is not None and (condition(wl, "Admitted") or {}).get("status") == "True",
            what="the PyTorchJob's Workload to be Admitted",
        )
        assert workload is not None
        assert workload["status"]["admission"]["clusterQueue"] == "team-a"
        flavors = {
            flavor
            for assignment in workload["status"]["admission"]["podSetAssignments"]
            for flavor in assignment["flavors"].values()
        }
        assert flavors == {"h100-ib"}
        resumed = wait_for(
            lambda: read(dyn, job["apiVersion"], "PyTorchJob", "llm", "team-a"),
            lambda pj: pj["spec"]["runPolicy"].get("suspend") is False,
            what="Kueue to resume the admitted PyTorchJob",
        )
        for spec in resumed["spec"]["pytorchReplicaSpecs"].values():
            pod = spec["template"]["spec"]
            assert pod["nodeSelector"] == {K.GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}
            assert {"key": K.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"} in pod[
                "tolerations"
            ]

        # The GPU runtime takes only queued TrainJobs: refused in a namespace without a
        # default LocalQueue (once the API server has loaded the policy)...
        unqueued = _trainjob("unqueued", "torch-h100-ib")
        trainjobs = resource_for(dyn, unqueued)

        def refusal() -> str:
            try:
                trainjobs.create(body=unqueued, namespace=kueue_namespace, dry_run="All")
            except ApiException as err:
                return api_error_message(err)
            return ""

        message = wait_for(refusal, bool, what="the runtime's queue policy to refuse a TrainJob")
        assert "kubetrain-runtime-queue-torch-h100-ib" in message, message
        assert (
            "TrainJobs of ClusterTrainingRuntime torch-h100-ib must be queued in Kueue: add the "
            f"label {K.KUEUE_QUEUE_NAME_LABEL}=default"
        ) in message, message
        assert not exists(dyn, TRAINJOB.api_version, TRAINJOB.kind, "unqueued", kueue_namespace)
        # ...accepted in team-b, whose LocalQueue "default" Kueue gives it on the way in.
        sdk_style = _trainjob("sdk-style", "torch-h100-ib")
        wait_until_kueue_knows_the_runtime(
            lambda: trainjobs.create(body=sdk_style, namespace="team-b", dry_run="All"),
            "torch-h100-ib",
        )
        accepted = trainjobs.create(body=sdk_style, namespace="team-b").to_dict()
        created.append({**sdk_style, "metadata": {"name": "sdk-style", "namespace": "team-b"}})
        labels = accepted["metadata"]["labels"]
        assert labels[K.KUEUE_QUEUE_NAME_LABEL] == "default", labels
        assert accepted["spec"]["suspend"] is True
    finally:
        for obj in created:
            resource = resource_for(dyn, obj)
            namespace = obj["metadata"].get("namespace", "team-a")
            resource.delete(name=obj["metadata"]["name"], namespace=namespace)
            wait_until_gone(dyn, obj, namespace)
        _delete(dyn, setup)
