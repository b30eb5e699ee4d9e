"""Gang scheduling with the real scheduler-plugins scheduler (Coscheduling) on its own
local control plane, the operator creating the PodGroups: a job that fits runs whole,
one that cannot fit stays entirely Pending and says so, two jobs that each need 60% of
the GPUs run one after the other without a partial placement. Volcano's PodGroup is
stored by Volcano's own CRD schema and its pods wait for the enqueue (Volcano's
scheduler cannot be built here: see docs/operator.md). Without the backend's CRD the operator
refuses to start."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient

from cluster.local import LocalCluster
from cluster.tools import find_tools
from kubetrain.controller.config import GangScheduler, OperatorConfig
from kubetrain.manifest import parse_yaml
from tests.clusters import ClusterClients
from tests.integration.kube import (
    apply,
    condition,
    install_crds,
    list_objects,
    wait_for,
    wait_for_established,
)
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job, template
from tests.integration.operator.running import SHARED_CONFIG
from tests.integration.test_gang_and_kueue_tools import _with_all_gpus_free

PODGROUP_API = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
#: How long a gang that cannot be placed is watched for a partial placement.
OBSERVE_SECONDS = 15.0


@pytest.fixture(scope="module")
def gang_crds(coscheduling: ClusterClients) -> None:
    install_crds(coscheduling.dyn)


@pytest.fixture(scope="module")
def gang_operator(gang_crds: None, coscheduling_cluster: LocalCluster) -> Iterator[RunningOperator]:
    """The module's operator with ``--gang-scheduler=scheduler-plugins`` on the
    coscheduling control plane, as the operator's own tests share one (``SHARED_CONFIG``):
    every namespace but the system ones, each test in its own."""
    config = dataclasses.replace(SHARED_CONFIG, gang_scheduler=GangScheduler.SCHEDULER_PLUGINS)
    running = RunningOperator(config, coscheduling_cluster.kubeconfig).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def gang(
    gang_operator: RunningOperator, coscheduling: ClusterClients, coscheduling_namespace: str
) -> Iterator[Jobs]:
    """The test's jobs on the coscheduling control plane, under the module's operator,
    every GPU free at the start."""
    jobs = Jobs(coscheduling.api_client, coscheduling_namespace)
    frees = _with_all_gpus_free(coscheduling.core_v1, coscheduling.dyn, coscheduling_namespace)
    next(frees)
    try:
        yield jobs
    finally:
        jobs.delete_every_job()  # the operator goes on: it must not make their pods again
        next(frees, None)


def gpu_pytorch_job(name: str, *, workers: int, gpus: int) -> dict[str, Any]:
    return pytorch_job(name, workers=workers, gpus=gpus)


def pod_group(dyn: DynamicClient, namespace: str, name: str, api: str = PODGROUP_API) -> Any:
    found = [
        g
        for g in list_objects(dyn, api, "PodGroup", namespace=namespace)
        if g["metadata"]["name"] == name
    ]
    return found[0] if found else None


def bound(pods: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(n for n, p in pods.items() if (p.get("spec") or {}).get("nodeName"))


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def finish(jobs: Jobs, name: str) -> None:
    for pod in jobs.pods(name):
        jobs.exit(pod, 0)


def test_a_job_that_fits_runs_whole_under_its_podgroup(
    gang: Jobs, coscheduling: ClusterClients
) -> None:
    jobs = gang
    jobs.create(gpu_pytorch_job("fits", workers=3, gpus=8))  # 32 GPUs: the whole cluster
    pods = jobs.wait_running("fits", {"fits-master-0", *(f"fits-worker-{i}" for i in range(3))})
    group = pod_group(coscheduling.dyn, jobs.namespace, "fits")
    assert group is not None
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["minResources"] == {"cpu": "400m", "nvidia.com/gpu": "32"}
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchJob", "fits", True)
    # The PodGroup existed before any pod.
    group_created = when(group["metadata"]["creationTimestamp"])
    for pod in pods.values():
        assert when(pod["metadata"]["creationTimestamp"]) >= group_created
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "fits"
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    jobs.wait_condition("PyTorchJob", "fits", "Running")
    finish(jobs, "fits")
    jobs.wait_condition("PyTorchJob", "fits", "Succeeded")
    wait_for(
        lambda: pod_group(coscheduling.dyn, jobs.namespace, "fits"),
        lambda g: g is None,
        what="the finished job's PodGroup to be deleted",
    )


def test_a_job_that_cannot_fit_stays_entirely_pending_and_says_so(
    gang: Jobs, coscheduling: ClusterClients
) -> None:
    jobs = gang
    jobs.create(gpu_pytorch_job("toobig", workers=4, gpus=8))  # 40 GPUs of 32
    jobs.wait_pods(
        "toobig",
        lambda pods: (
            len(pods) == 5
            and all(
                (condition(p, "PodScheduled") or {}).get("status") == "False" for p in pods.values()
            )
        ),
        what="all 5 pods tried and reported unschedulable",
    )
    deadline = time.monotonic() + OBSERVE_SECONDS
    while time.monotonic() < deadline:
        assert bound(jobs.pods("toobig")) == []
        time.sleep(0.5)
    created = jobs.wait(
        "PyTorchJob",
        "toobig",
        lambda job: "gang scheduler" in ((condition(job, "Created") or {}).get("message") or ""),
        what="the Created condition to say the gang waits",
    )
    message = (condition(created, "Created") or {})["message"]
    assert "PodGroup toobig together" in message, message
    assert condition(created, "Running") is None


def test_two_jobs_of_sixty_percent_run_one_after_the_other_whole(
    gang: Jobs, coscheduling: ClusterClients
) -> None:
    jobs = gang
    # 5 pods of 4 GPUs = 20 of the 32 GPUs each: only one job fits at a time.
    first = gpu_pytorch_job("first", workers=4, gpus=4)
    # Its pods are deleted when it ends: kube-scheduler moves waiting pods on a pod's
    # deletion at once, while a pod that only turns Succeeded may leave them in its
    # unschedulable queue for up to 5 minutes.
    first["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    jobs.create(first)
    jobs.wait_running("first", {"first-master-0", *(f"first-worker-{i}" for i in range(4))})
    jobs.create(gpu_pytorch_job("second", workers=4, gpus=4))
    jobs.wait_pods(
        "second",
        lambda pods: (
            len(pods) == 5
            and all(
                (condition(p, "PodScheduled") or {}).get("status") == "False" for p in pods.values()
            )
        ),
        what="the second job's pods tried and unschedulable",
    )
    deadline = time.monotonic() + OBSERVE_SECONDS / 2
    while time.monotonic() < deadline:
        assert bound(jobs.pods("second")) == [], "a partial placement of the second job"
        time.sleep(0.5)
    finish(jobs, "first")
    jobs.wait_condition("PyTorchJob", "first", "Succeeded")
    # While the first job held the GPUs no pod of the second was bound (checked above);
    # now the whole gang is. (Its members pass Permit together but are bound by one API
    # call each, so a poll during those calls may see some bound and not yet the rest.)
    wait_for(
        lambda: bound(jobs.pods("second")),
        lambda names: len(names) == 5,
        what="the second job placed",
        timeout=330,
    )
    jobs.wait_condition("PyTorchJob", "second", "Running")
    # The gang's own record (scheduler-plugins' controller): all five members running.
    wait_for(
        lambda: pod_group(coscheduling.dyn, jobs.namespace, "second"),
        lambda g: g is not None and (g.get("status") or {}).get("running") == 5,
        what="PodGroup second to count 5 running members",
    )


def test_an_mpi_launcher_joins_its_workers_gang(gang: Jobs, coscheduling: ClusterClients) -> None:
    jobs = gang
    job = mpi_job("mpi", workers=2)
    for rtype in ("Launcher", "Worker"):
        job["spec"]["mpiReplicaSpecs"][rtype]["template"] = template(
            rtype.lower(), gpus=8 if rtype == "Worker" else 0
        )
    jobs.create(job)
    pods = jobs.wait_pods(
        "mpi",
        lambda pods: len(pods) == 3 and len(bound(pods)) == 3,
        what="the launcher and both workers placed",
    )
    group = pod_group(coscheduling.dyn, jobs.namespace, "mpi")
    assert group is not None and group["spec"]["minMember"] == 3
    assert {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in pods.values()} == {
        "mpi"
    }
    launcher = next(p for n, p in pods.items() if n.startswith("mpi-launcher"))
    assert not launcher["spec"].get("schedulingGates")


def test_a_trainjob_runtime_with_a_podgroup_policy(
    gang: Jobs, coscheduling: ClusterClients
) -> None:
    jobs = gang
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": "gang-torch",
            "namespace": jobs.namespace,
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 90}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {"template": template("node", gpus=8)},
                            },
                        }
                    ]
                }
            },
        },
    }
    apply(coscheduling.dyn, runtime, namespace=jobs.namespace)
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": jobs.namespace},
        "spec": {"runtimeRef": {"name": "gang-torch", "kind": "TrainingRuntime"}},
    }
    apply(coscheduling.dyn, trainjob, namespace=jobs.namespace)
    pods = jobs.wait_pods(
        "tj", lambda pods: len(pods) == 2 and len(bound(pods)) == 2, what="both nodes placed"
    )
    group = pod_group(coscheduling.dyn, jobs.namespace, "tj")
    assert group is not None
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "200m", "nvidia.com/gpu": "16"},
        "scheduleTimeoutSeconds": 90,
    }
    assert all(
        p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "tj" for p in pods.values()
    )


# Volcano ------------------------------------------------------------------------------


@pytest.fixture
def volcano_crd(dyn: DynamicClient) -> Iterator[None]:
    crd = parse_yaml(find_tools(only=("volcano",)).volcano_podgroup_crd.read_text())
    apply(dyn, crd)
    wait_for_established(dyn, crd["metadata"]["name"])
    try:
        yield
    finally:
        dyn.resources.get(
            api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
        ).delete(name=crd["metadata"]["name"])


def test_volcano_podgroups_follow_volcanos_schema_and_pods_wait_for_the_enqueue(
    volcano_crd: None,
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    dyn: DynamicClient,
    jobs: Jobs,
    namespace: str,
) -> None:
    config = OperatorConfig(
        namespaces=(namespace,),
        workers=2,
        kube_api_qps=100,
        kube_api_burst=200,
        gang_scheduler=GangScheduler.VOLCANO,
    )
    running = RunningOperator(config, kubeconfig).start()
    try:
        job = pytorch_job(
            "vc",
            workers=2,
            run_policy={"schedulingPolicy": {"queue": "team-a", "priorityClass": "training"}},
        )
        jobs.create(job)
        group = wait_for(
            lambda: pod_group(dyn, namespace, "vc", VOLCANO_API),
            lambda g: g is not None,
            what="the Volcano PodGroup",
        )
        # Stored as sent: Volcano's structural schema pruned nothing and accepted the types.
        assert group["spec"] == {
            "minMember": 3,
            "minResources": {"cpu": "300m", "nvidia.com/gpu": "3"},
            "queue": "team-a",
            "priorityClassName": "training",
        }
        time.sleep(3)
        assert jobs.pods("vc") == {}, "pods before Volcano enqueued the gang"
        # What Volcano's enqueue action does once the gang fits its queue (Volcano's
        # CRD has no status subresource: the status is patched on the object).
        dyn.resources.get(api_version=VOLCANO_API, kind="PodGroup").patch(
            body={"status": {"phase": "Inqueue"}},
            name="vc",
            namespace=namespace,
            content_type="application/merge-patch+json",
        )
        pods = jobs.wait_pods("vc", lambda pods: len(pods) == 3, what="the gang's pods")
        for name, pod in pods.items():
            annotations = pod["metadata"]["annotations"]
            assert annotations["scheduling.k8s.io/group-name"] == "vc", name
            assert annotations["volcano.sh/task-spec"] in ("master", "worker"), name
            assert pod["spec"]["schedulerName"] == "volcano", name
    finally:
        running.stop()


def test_the_operator_refuses_to_start_without_the_backends_crd(
    installed_crds: list[dict[str, Any]], kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    # The session's main control plane has no scheduler-plugins PodGroup CRD.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubetrain.commands.operator",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={namespace}",
            "--gang-scheduler=scheduler-plugins",
            "--metrics-bind-address=127.0.0.1",
            "--health-bind-address=127.0.0.1",
            "--progress-bind-address=127.0.0.1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert (
        "--gang-scheduler=scheduler-plugins: the PodGroup API scheduling.x-k8s.io/v1alpha1 is "
        "not served (CRD podgroups.scheduling.x-k8s.io is not installed)" in result.stderr
    ), result.stderr[-2000:]
