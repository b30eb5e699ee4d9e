"""The operator with the real Kueue (v0.15.2, ``cluster/kueue.py``) on its own control
plane, for every kind kubetrain runs: PyTorchJob, TFJob, MPIJob and TrainJob.

Kueue admits a job by writing its ResourceFlavor's node labels and tolerations into the
job's pod templates and unsuspending it, and preempts it by suspending it again; it
releases the job's quota once the job reports no active pod (``replicaStatuses[*].active``,
a TrainJob's ``jobsStatus[*].active``). The templates here carry no GPU toleration, and
the flavor's node labels name the GPU pool: a pod lands on a GPU node only with what
Kueue injected. Pods are kwok's: they run at once and end when a test says so.
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cluster.fake_pods import exit_patch
from cluster.kueue import QUEUE_NAME_LABEL, Kueue
from cluster.topology import GPU_RESOURCE, POOL_LABEL
from kubetrain.api import keys as K
from kubetrain.controller.config import GangScheduler
from tests.builders.jobs import GPU_TOLERATION
from tests.clusters import ClusterClients, fresh_namespace
from tests.integration.kube import (
    apply,
    condition,
    list_objects,
    read,
    wait_for,
    wait_until_kueue_knows_the_runtime,
)
from tests.integration.operator import jobs as operator_jobs
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import torch_runtime, train_job
from tests.integration.operator.running import SHARED_CONFIG

KUEUE_API = "kueue.x-k8s.io/v1beta2"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: What the flavor makes Kueue write into every admitted pod template.
FLAVOR_NODE_LABELS = {POOL_LABEL: "gpu"}
#: A finalizer the tests put on a pod to keep it Terminating (nothing else removes it).
HOLD_FINALIZER = "kubetrain.dev/test-hold"
#: How long a test watches that something does not happen (Kueue reacts to a job's
#: status within a second when nothing else is queued).
QUIET_SECONDS = 4.0
#: Generous: several control planes and engineers share two cores.
WAIT = 90.0

GROUPS = {
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "TFJob": ("kubeflow.org", "v1", "tfjobs"),
    "MPIJob": ("kubeflow.org", "v2beta1", "mpijobs"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
}
#: The condition a kind reports at its successful end.
DONE = {"TrainJob": "Complete"}


# Jobs without any GPU toleration: Kueue's flavor brings it --------------------------------


def pytorch_job(name: str, *, workers: int = 1, gpus: int = 4) -> dict[str, Any]:
    return operator_jobs.pytorch_job(
        name, workers=workers, gpus=gpus, tolerate=False, nproc_per_node=None
    )


def tf_job(name: str, *, gpus: int = 4) -> dict[str, Any]:
    return operator_jobs.tf_job(
        name, workers=1, ps=1, gpus=gpus, tolerate=False, restart_policy="OnFailure"
    )


def mpi_job(name: str, *, workers: int = 2, gpus: int = 4) -> dict[str, Any]:
    return operator_jobs.mpi_job(
        name, workers=workers, slots=gpus, gpus=gpus, tolerate=False, restart_policy="OnFailure"
    )


RUNTIME = "torch-queued"


def queued_runtime(namespace: str) -> dict[str, Any]:
    """A TrainingRuntime of one replicated job ``node``, without GPU toleration."""
    return torch_runtime(RUNTIME, namespace, operator_jobs.template("node", gpus=4, tolerate=False))


def queued_train_job(name: str, *, nodes: int = 2) -> dict[str, Any]:
    return train_job(name, RUNTIME, nodes=nodes)


@dataclass(frozen=True)
class Case:
    """One kind: its job, the pods the operator makes, the pods whose exit ends it."""

    kind: str
    make: Callable[[str], dict[str, Any]]
    pods: Callable[[str], set[str]]
    deciding: Callable[[str], list[str]]


CASES = {
    "PyTorchJob": Case(
        "PyTorchJob",
        pytorch_job,
        lambda n: {f"{n}-master-0", f"{n}-worker-0"},
        lambda n: [f"{n}-master-0"],
    ),
    "TFJob": Case(
        "TFJob",
        tf_job,
        lambda n: {f"{n}-chief-0", f"{n}-ps-0", f"{n}-worker-0"},
        lambda n: [f"{n}-chief-0"],
    ),
    # The launcher's pod is the batch Job's (its name has a random suffix).
    "MPIJob": Case(
        "MPIJob",
        mpi_job,
        lambda n: {f"{n}-worker-0", f"{n}-worker-1"},
        lambda n: [],
    ),
    "TrainJob": Case(
        "TrainJob",
        queued_train_job,
        lambda n: {f"{n}-node-0-0", f"{n}-node-0-1"},
        lambda n: [f"{n}-node-0-0", f"{n}-node-0-1"],
    ),
}


# Talking to the cluster ---------------------------------------------------------------


class Cluster:
    """The test's view of Kueue's control plane: jobs of every kind, their children,
    their Workloads, and Kueue's queues."""

    def __init__(self, clients: ClusterClients, namespace: str) -> None:
        self.clients, self.namespace = clients, namespace
        self.dyn = clients.dyn
        self.core, self.batch = clients.core_v1, clients.batch_v1
        self.custom = client.CustomObjectsApi(clients.api_client)

    # -- jobs ---------------------------------------------------------------------------

    def create(
        self,
        job: dict[str, Any],
        *,
        queue: str,
        priority: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        job = copy.deepcopy(job)
        labels = job["metadata"].setdefault("labels", {})
        labels[QUEUE_NAME_LABEL] = queue
        if priority:
            labels[PRIORITY_LABEL] = priority
        group, version, plural = GROUPS[job["kind"]]
        created = self.custom.create_namespaced_custom_object(
            group, version, self.namespace, plural, job, dry_run="All" if dry_run else None
        )
        assert isinstance(created, dict)
        return created

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        group, version, plural = GROUPS[kind]
        try:
            found = self.custom.get_namespaced_custom_object(
                group, version, self.namespace, plural, name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        assert isinstance(found, dict)
        return found

    def delete(self, kind: str, name: str) -> None:
        group, version, plural = GROUPS[kind]
        self.custom.delete_namespaced_custom_object(group, version, self.namespace, plural, name)

    def wait_job(
        self, kind: str, name: str, done: Callable[[dict[str, Any]], bool], *, what: str
    ) -> dict[str, Any]:
        return _wait_found(lambda: self.get(kind, name), done, what=f"{kind} {name}: {what}")

    def wait_condition(
        self, kind: str, name: str, type_: str, status: str = "True"
    ) -> dict[str, Any]:
        return self.wait_job(
            kind,
            name,
            lambda j: (job_condition(j, type_) or {}).get("status") == status,
            what=f"condition {type_}={status}",
        )

    # -- children -----------------------------------------------------------------------

    def pods(self, kind: str, name: str) -> dict[str, dict[str, Any]]:
        label = K.JOBSET_NAME_LABEL if kind == "TrainJob" else K.JOB_NAME
        found = self.core.list_namespaced_pod(self.namespace, label_selector=f"{label}={name}")
        return self._by_name(found.items)

    def _by_name(self, items: list[Any]) -> dict[str, dict[str, Any]]:
        serialized = [serialize(self.clients, item) for item in items]
        return {str(obj["metadata"]["name"]): obj for obj in serialized}

    def children(self, job: dict[str, Any]) -> list[str]:
        """Every object the job owns, and the pods of the batch Jobs it owns, as
        ``Kind/name``."""
        uid = job["metadata"]["uid"]
        out: list[str] = []
        owned_jobs: set[str] = set()
        for api_version, kind in (
            ("v1", "Service"),
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("batch/v1", "Job"),
            ("v1", "Pod"),
        ):
            for obj in list_objects(self.dyn, api_version, kind, namespace=self.namespace):
                owners = obj["metadata"].get("ownerReferences") or []
                mine = any(o.get("uid") == uid for o in owners)
                launched = any(
                    o.get("kind") == "Job" and o.get("name") in owned_jobs for o in owners
                )
                if mine or launched:
                    out.append(f"{kind}/{obj['metadata']['name']}")
                    if kind == "Job" and mine:
                        owned_jobs.add(obj["metadata"]["name"])
        return out

    def launcher_pods(self, name: str) -> dict[str, dict[str, Any]]:
        """The pods of an MPIJob's launcher Job."""
        found = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"batch.kubernetes.io/job-name={name}-launcher"
        )
        return self._by_name(found.items)

    def wait_event(self, name: str, reason: str) -> None:
        """Wait for an Event with ``reason`` about the object ``name``."""
        wait_for(
            lambda: [
                e.reason
                for e in self.core.list_namespaced_event(
                    self.namespace, field_selector=f"involvedObject.name={name}"
                ).items
            ],
            lambda reasons: reason in reasons,
            what=f"an Event {reason} about {name}",
            timeout=WAIT,
        )

    def exit(self, pod: str, code: int = 0) -> None:
        self.core.patch_namespaced_pod(pod, self.namespace, exit_patch(code))

    def hold(self, pod: str) -> None:
        """Keep ``pod`` Terminating once deleted, until ``release``."""
        self.core.patch_namespaced_pod(
            pod, self.namespace, {"metadata": {"finalizers": [HOLD_FINALIZER]}}
        )

    def release(self, pod: str) -> None:
        try:
            self.core.patch_namespaced_pod(pod, self.namespace, {"metadata": {"finalizers": None}})
        except ApiException as err:
            if err.status != 404:
                raise

    # -- Kueue --------------------------------------------------------------------------

    def workload(self, kind: str, name: str) -> dict[str, Any] | None:
        for workload in list_objects(self.dyn, KUEUE_API, "Workload", namespace=self.namespace):
            owners = workload["metadata"].get("ownerReferences") or []
            if any(o["kind"] == kind and o["name"] == name for o in owners):
                return workload
        return None

    def wait_workload(
        self, kind: str, name: str, done: Callable[[dict[str, Any]], bool], *, what: str
    ) -> dict[str, Any]:
        return _wait_found(
            lambda: self.workload(kind, name), done, what=f"the Workload of {kind} {name}: {what}"
        )

    def set_workload_active(self, kind: str, name: str, active: bool) -> None:
        workload = self.workload(kind, name)
        assert workload is not None, f"{kind} {name} has no Workload"
        self.dyn.resources.get(api_version=KUEUE_API, kind="Workload").patch(
            name=workload["metadata"]["name"],
            namespace=self.namespace,
            body={"spec": {"active": active}},
            content_type="application/merge-patch+json",
        )


def _wait_found(
    fetch: Callable[[], dict[str, Any] | None],
    done: Callable[[dict[str, Any]], bool],
    *,
    what: str,
) -> dict[str, Any]:
    """Until ``fetch`` finds the object and ``done`` holds for it; the object."""
    found = wait_for(fetch, lambda obj: obj is not None and done(obj), what=what, timeout=WAIT)
    assert found is not None
    return found


def _items(found: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = found["items"]
    return items


def serialize(clients: ClusterClients, obj: Any) -> dict[str, Any]:
    data: dict[str, Any] = clients.api_client.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return data


def job_condition(job: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """A job's condition: for a TrainJob kubetrain's own lifecycle (``status.kubetrain``)
    except for its final Complete/Failed, which the SDK-facing list holds."""
    if job["kind"] == "TrainJob" and type_ not in ("Complete", "Failed", "Suspended"):
        book = (job.get("status") or {}).get("kubetrain") or {}
        return next((c for c in book.get("conditions") or [] if c["type"] == type_), None)
    found = condition(job, type_)
    if found is None and job["kind"] == "TrainJob" and type_ == "Suspended":
        # The SDK's list drops Suspended on resume: kubetrain's still says False.
        book = (job.get("status") or {}).get("kubetrain") or {}
        found = next((c for c in book.get("conditions") or [] if c["type"] == type_), None)
    return found


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    return (condition(obj, type_) or {}).get("status") == "True"


def suspended(job: dict[str, Any]) -> bool:
    spec = job["spec"]
    policy = spec.get("runPolicy") if job["kind"] != "TrainJob" else spec
    return bool((policy or {}).get("suspend"))


def active_pods_reported(job: dict[str, Any]) -> int:
    """The active count Kueue reads (``IsActive``) from the job's status."""
    status = job.get("status") or {}
    if job["kind"] == "TrainJob":
        return sum(int(entry.get("active") or 0) for entry in status.get("jobsStatus") or [])
    return sum(int(s.get("active") or 0) for s in (status.get("replicaStatuses") or {}).values())


def assert_placed_by_the_flavor(pods: dict[str, dict[str, Any]]) -> None:
    """Every pod carries the flavor's node labels and toleration, and runs on a GPU node."""
    for name, pod in pods.items():
        spec = pod["spec"]
        for key, value in FLAVOR_NODE_LABELS.items():
            assert (spec.get("nodeSelector") or {}).get(key) == value, (
                name,
                spec.get("nodeSelector"),
            )
        assert GPU_TOLERATION in (spec.get("tolerations") or []), (name, spec.get("tolerations"))
        assert (spec.get("nodeName") or "").startswith("kwok-gpu-"), (name, spec.get("nodeName"))


def running(pods: dict[str, dict[str, Any]], names: set[str]) -> bool:
    return names <= set(pods) and all(
        pods[n]["status"].get("phase") == "Running"
        and not pods[n]["metadata"].get("deletionTimestamp")
        for n in names
    )


# Fixtures -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Queue:
    flavor: str
    cluster_queue: str
    local_queue: str


def _flavor(name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": dict(FLAVOR_NODE_LABELS), "tolerations": [GPU_TOLERATION]},
    }


def _cluster_queue(
    name: str,
    flavor: str,
    *,
    gpus: int,
    cohort: str | None = None,
    borrowing: int | None = None,
    hold: bool = False,
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": GPU_RESOURCE, "nominalQuota": str(gpus)}
    if borrowing is not None:
        gpu["borrowingLimit"] = str(borrowing)
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", GPU_RESOURCE],
                "flavors": [
                    {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "64"}, gpu]}
                ],
            }
        ],
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "stopPolicy": "Hold" if hold else "None",
    }
    if cohort:
        spec["cohortName"] = cohort
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _local_queue(name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue},
    }


def _wait_active(cluster: Cluster, cluster_queue: str) -> None:
    wait_for(
        lambda: read(cluster.dyn, KUEUE_API, "ClusterQueue", cluster_queue),
        lambda cq: is_true(cq, "Active"),
        what=f"ClusterQueue {cluster_queue} to be Active",
        timeout=WAIT,
    )


@pytest.fixture
def cluster(kueue_clients: ClusterClients, kueue_namespace: str) -> Cluster:
    return Cluster(kueue_clients, kueue_namespace)


@pytest.fixture(scope="module")
def kueue_operator(kueue: Kueue, request: pytest.FixtureRequest) -> Iterator[RunningOperator]:
    """The module's operator on Kueue's cluster, as the operator's own tests share one
    (``SHARED_CONFIG``): every namespace but the system ones (each test has its own), with
    gang scheduling when a test parametrizes it (indirectly) with a backend; pytest keeps
    one per backend, so the module starts two."""
    config = dataclasses.replace(
        SHARED_CONFIG, gang_scheduler=getattr(request, "param", GangScheduler.NONE)
    )
    running_operator = RunningOperator(config, kueue.cluster.kubeconfig).start()
    try:
        yield running_operator
    finally:
        running_operator.stop()


class Cleanup:
    """Cluster-scoped Kueue objects a test made, deleted after it (namespaced ones go with
    the namespace); jobs are deleted first, while the operator still runs, so a runtime's
    in-use finalizer is released."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.objects: list[tuple[str, str]] = []

    def add(self, obj: dict[str, Any], *, namespaced: bool = False) -> dict[str, Any]:
        applied = apply(
            self.cluster.dyn, obj, namespace=self.cluster.namespace if namespaced else None
        )
        if not namespaced:
            self.objects.append((obj["kind"], obj["metadata"]["name"]))
        return applied

    def close(self) -> None:
        for group, version, plural in GROUPS.values():
            self.cluster.custom.delete_collection_namespaced_custom_object(
                group, version, self.cluster.namespace, plural
            )
        for name, pod in self.cluster._by_name(
            self.cluster.core.list_namespaced_pod(self.cluster.namespace).items
        ).items():
            if HOLD_FINALIZER in (pod["metadata"].get("finalizers") or []):
                self.cluster.release(name)
        group, version, plural = GROUPS["TrainJob"]
        wait_for(
            lambda: _items(
                self.cluster.custom.list_namespaced_custom_object(
                    group, version, self.cluster.namespace, plural
                )
            ),
            lambda items: not items,
            what="the test's TrainJobs gone (their runtime released)",
            timeout=WAIT,
        )
        for kind, name in reversed(self.objects):
            try:
                self.cluster.dyn.resources.get(api_version=KUEUE_API, kind=kind).delete(name=name)
            except ApiException as err:
                if err.status != 404:
                    raise


@pytest.fixture
def cleanup(cluster: Cluster, kueue_operator: RunningOperator) -> Iterator[Cleanup]:
    made = Cleanup(cluster)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def held_queue(cluster: Cluster, cleanup: Cleanup) -> Queue:
    """A GPU flavor, a ClusterQueue of 16 GPUs that holds admission (``stopPolicy: Hold``)
    until the test lets it go, and a LocalQueue in the test's namespace; the namespace
    also holds the TrainJobs' runtime."""
    suffix = secrets.token_hex(3)
    queue = Queue(f"gpu-{suffix}", f"team-{suffix}", "team")
    cleanup.add(_flavor(queue.flavor))
    cleanup.add(_cluster_queue(queue.cluster_queue, queue.flavor, gpus=16, hold=True))
    cleanup.add(_local_queue(queue.local_queue, queue.cluster_queue), namespaced=True)
    cleanup.add(queued_runtime(cluster.namespace), namespaced=True)
    probe = queued_train_job("probe")
    wait_until_kueue_knows_the_runtime(
        lambda: cluster.create(probe, queue=queue.local_queue, dry_run=True), RUNTIME
    )
    return queue


def _release_hold(cluster: Cluster, queue: Queue) -> None:
    cluster.dyn.resources.get(api_version=KUEUE_API, kind="ClusterQueue").patch(
        name=queue.cluster_queue,
        body={"spec": {"stopPolicy": "None"}},
        content_type="application/merge-patch+json",
    )


def _admitted(wl: dict[str, Any]) -> bool:
    return is_true(wl, "Admitted")


# Kueue and gang scheduling together --------------------------------------------------

PODGROUP_API = "scheduling.x-k8s.io/v1alpha1"


def pod_groups(cluster: Cluster) -> dict[str, dict[str, Any]]:
    found = list_objects(cluster.dyn, PODGROUP_API, "PodGroup", namespace=cluster.namespace)
    return {str(g["metadata"]["name"]): g for g in found}


@pytest.mark.parametrize("kueue_operator", [GangScheduler.SCHEDULER_PLUGINS], indirect=True)
def test_a_gang_is_made_only_on_admission_and_goes_on_preemption(
    cluster: Cluster, held_queue: Queue, kueue_operator: RunningOperator
) -> None:
    """Kueue decides when, the coscheduling scheduler how: no PodGroup (nor pod) while
    the job waits in its queue, the PodGroup on admission with every pod placed whole,
    gone with the pods on preemption (so a preempted gang holds nothing in the
    scheduler), and made again on resume."""
    name = "gang"
    cluster.create(pytorch_job(name, workers=1, gpus=4), queue=held_queue.local_queue)
    job = cluster.wait_condition("PyTorchJob", name, "Suspended")
    time.sleep(QUIET_SECONDS)
    assert pod_groups(cluster) == {} and cluster.children(job) == []

    def run_whole(what: str) -> dict[str, Any]:
        cluster.wait_workload("PyTorchJob", name, _admitted, what=what)
        pods = wait_for(
            lambda: cluster.pods("PyTorchJob", name),
            lambda p: running(p, {f"{name}-master-0", f"{name}-worker-0"}),
            what=f"the gang of {name} Running ({what})",
            timeout=WAIT,
        )
        for pod in pods.values():
            assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == name
        assert_placed_by_the_flavor(pods)
        group = wait_for(
            lambda: pod_groups(cluster).get(name),
            lambda g: g is not None and (g.get("status") or {}).get("running") == 2,
            what=f"PodGroup {name} counting its 2 pods running ({what})",
            timeout=WAIT,
        )
        assert group is not None
        assert group["spec"]["minMember"] == 2
        assert group["spec"]["minResources"][GPU_RESOURCE] == "8"
        return group

    _release_hold(cluster, held_queue)
    first = run_whole("admitted")

    cluster.set_workload_active("PyTorchJob", name, False)
    cluster.wait_job("PyTorchJob", name, suspended, what="suspended by Kueue")
    wait_for(
        lambda: (cluster.pods("PyTorchJob", name), pod_groups(cluster)),
        lambda found: found == ({}, {}),
        what="the pods and the PodGroup gone on preemption",
        timeout=WAIT,
    )
    cluster.wait_workload(
        "PyTorchJob", name, lambda wl: not is_true(wl, "QuotaReserved"), what="quota released"
    )

    cluster.set_workload_active("PyTorchJob", name, True)
    again = run_whole("admitted again")
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    cluster.exit(f"{name}-master-0", 0)
    cluster.wait_condition("PyTorchJob", name, "Succeeded")


# Every kind: queued -> admitted -> running -> preempted -> resumed -> complete ----------


@pytest.mark.parametrize("kind", list(CASES))
def test_every_kind_is_admitted_preempted_resumed_and_completes(
    kind: str, cluster: Cluster, held_queue: Queue
) -> None:
    case, name = CASES[kind], "queued"
    created = cluster.create(case.make(name), queue=held_queue.local_queue)
    # Kueue's webhook suspended it on creation; the operator makes nothing for it but a
    # TrainJob's runtime snapshot (pinned at the first reconcile, as upstream does).
    assert suspended(created), created["spec"]
    job = cluster.wait_condition(kind, name, "Suspended")
    workload = cluster.wait_workload(kind, name, lambda wl: True, what="created")
    assert not is_true(workload, "QuotaReserved"), workload.get("status")
    time.sleep(QUIET_SECONDS)
    pinned = [f"ConfigMap/{name}-runtime-snapshot"] if kind == "TrainJob" else []
    assert cluster.children(job) == pinned
    assert suspended(cluster.get(kind, name) or {})

    # Admission: Kueue injects the flavor and unsuspends; the pods are built from that.
    _release_hold(cluster, held_queue)
    workload = cluster.wait_workload(kind, name, _admitted, what="Admitted")
    assignments = workload["status"]["admission"]["podSetAssignments"]
    assert {a["flavors"][GPU_RESOURCE] for a in assignments if GPU_RESOURCE in a["flavors"]} == {
        held_queue.flavor
    }
    pods = wait_for(
        lambda: cluster.pods(kind, name),
        lambda p: running(p, case.pods(name)),
        what=f"the pods of {kind} {name} Running",
        timeout=WAIT,
    )
    assert_placed_by_the_flavor({n: pods[n] for n in case.pods(name)})
    first_start = cluster.wait_condition(kind, name, "Running")["status"]["startTime"]
    if kind == "MPIJob":
        launcher = serialize(
            cluster.clients,
            cluster.batch.read_namespaced_job(f"{name}-launcher", cluster.namespace),
        )
        launcher_pod = launcher["spec"]["template"]["spec"]
        assert launcher_pod["nodeSelector"][POOL_LABEL] == "gpu", launcher_pod
        assert GPU_TOLERATION in launcher_pod["tolerations"], launcher_pod

    # Preemption (the Workload deactivated): one pod is kept Terminating by a finalizer.
    held = sorted(case.pods(name))[0]
    cluster.hold(held)
    cluster.set_workload_active(kind, name, False)
    cluster.wait_job(kind, name, suspended, what="suspended by Kueue")
    cluster.wait_condition(kind, name, "Suspended")
    wait_for(
        lambda: cluster.pods(kind, name),
        lambda p: set(p) == {held} and bool(p[held]["metadata"].get("deletionTimestamp")),
        what=f"every pod of {kind} {name} deleted, {held} held Terminating",
        timeout=WAIT,
    )
    # While a pod still holds its GPUs the job says so, and Kueue keeps the quota.
    deadline = time.monotonic() + QUIET_SECONDS
    while time.monotonic() < deadline:
        job = cluster.get(kind, name) or {}
        workload = cluster.workload(kind, name) or {}
        assert active_pods_reported(job) >= 1, job.get("status")
        assert is_true(workload, "QuotaReserved"), workload.get("status")
        time.sleep(0.5)
    assert is_true(workload, "Evicted"), workload.get("status")
    cluster.release(held)
    workload = cluster.wait_workload(
        kind, name, lambda wl: not is_true(wl, "QuotaReserved"), what="quota released"
    )
    assert cluster.pods(kind, name) == {}
    job = cluster.get(kind, name) or {}
    assert active_pods_reported(job) == 0, job.get("status")
    assert (job_condition(job, "Running") or {}).get("status") != "True", job.get("status")

    # Reactivated: admitted again, resumed from the current spec, and run to the end.
    cluster.set_workload_active(kind, name, True)
    cluster.wait_workload(kind, name, _admitted, what="Admitted again")
    resumed = cluster.wait_job(kind, name, lambda j: not suspended(j), what="resumed")
    pods = wait_for(
        lambda: cluster.pods(kind, name),
        lambda p: running(p, case.pods(name)),
        what=f"the pods of {kind} {name} Running again",
        timeout=WAIT,
    )
    assert_placed_by_the_flavor({n: pods[n] for n in case.pods(name)})
    resumed = cluster.wait_condition(kind, name, "Running")
    assert (job_condition(resumed, "Suspended") or {}).get("status") != "True"
    assert resumed["status"]["startTime"] >= first_start
    deciding = case.deciding(name)
    if kind == "MPIJob":
        launcher_pods = wait_for(
            lambda: cluster.launcher_pods(name),
            lambda p: bool(p) and running(p, set(p)),
            what=f"the launcher pod of {name} Running",
            timeout=WAIT,
        )
        assert_placed_by_the_flavor(launcher_pods)
        deciding = sorted(launcher_pods)
    for pod in deciding:
        cluster.exit(pod, 0)
    cluster.wait_condition(kind, name, DONE.get(kind, "Succeeded"))
    # Kueue declares the Workload finished and releases its quota. (It may then delete
    # the finished Workload as "not matching" the job: Kueue v0.15 compares the job's
    # tolerations, the flavor's included, with the Workload's once the quota is gone.)
    cluster.wait_event(name, "FinishedWorkload")
    wait_for(
        lambda: _gpu_usage(cluster, held_queue.cluster_queue)["total"],
        lambda total: total == "0",
        what="the quota released",
        timeout=WAIT,
    )


# Deadlines and TTL across suspend and resume ---------------------------------------------


@pytest.fixture
def open_queue(cluster: Cluster, cleanup: Cleanup) -> Queue:
    """A GPU flavor, a ClusterQueue of 16 GPUs admitting at once, a LocalQueue."""
    suffix = secrets.token_hex(3)
    queue = Queue(f"gpu-{suffix}", f"team-{suffix}", "team")
    cleanup.add(_flavor(queue.flavor))
    cleanup.add(_cluster_queue(queue.cluster_queue, queue.flavor, gpus=16))
    cleanup.add(_local_queue(queue.local_queue, queue.cluster_queue), namespaced=True)
    _wait_active(cluster, queue.cluster_queue)
    return queue


DEADLINE_SECONDS = 10
TTL_SECONDS = 3


def _time(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def test_the_deadline_counts_from_the_resume_and_the_ttl_removes_the_job_and_its_workload(
    cluster: Cluster, open_queue: Queue
) -> None:
    kind, name = "PyTorchJob", "deadline"
    job = pytorch_job(name)
    job["spec"]["runPolicy"] = {
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "ttlSecondsAfterFinished": TTL_SECONDS,
    }
    cluster.create(job, queue=open_queue.local_queue)
    first_start = cluster.wait_condition(kind, name, "Running")["status"]["startTime"]

    # Preempted with a TTL set (kueue#2923: upstream then kept the job Running).
    cluster.set_workload_active(kind, name, False)
    stopped = cluster.wait_condition(kind, name, "Suspended")
    assert (condition(stopped, "Running") or {}).get("status") == "False", stopped["status"]
    wait_for(lambda: cluster.pods(kind, name), lambda p: not p, what="pods gone", timeout=WAIT)
    # Suspended past the deadline counted from the first start: the clock is stopped.
    time.sleep(max(0.0, _time(first_start) + DEADLINE_SECONDS + 2 - time.time()))
    still = cluster.get(kind, name) or {}
    assert not is_true(still, "Failed"), still["status"]
    assert is_true(still, "Suspended"), still["status"]

    # Resumed: a new start time, running again, and failed a deadline after the resume.
    cluster.set_workload_active(kind, name, True)
    resumed = cluster.wait_job(
        kind,
        name,
        lambda j: is_true(j, "Running") and not suspended(j),
        what="Running again",
    )
    resumed_start = resumed["status"]["startTime"]
    assert _time(resumed_start) > _time(first_start) + DEADLINE_SECONDS
    assert not is_true(resumed, "Failed"), resumed["status"]
    failed = cluster.wait_condition(kind, name, "Failed")
    reason = condition(failed, "Failed") or {}
    assert reason.get("reason") == "DeadlineExceeded", reason
    assert _time(reason["lastTransitionTime"]) >= _time(resumed_start) + DEADLINE_SECONDS - 1
    cluster.wait_event(name, "FinishedWorkload")
    wait_for(lambda: cluster.pods(kind, name), lambda p: not p, what="pods gone", timeout=WAIT)

    # The TTL deletes the job, and its Workload goes with it (owned by the job).
    wait_for(lambda: cluster.get(kind, name), lambda j: j is None, what="TTL", timeout=WAIT)
    wait_for(
        lambda: cluster.workload(kind, name),
        lambda wl: wl is None,
        what="the Workload deleted with its job",
        timeout=WAIT,
    )


# managedBy ---------------------------------------------------------------------------


def test_a_job_managed_by_multikueue_is_left_alone(cluster: Cluster, open_queue: Queue) -> None:
    kind, name = "PyTorchJob", "remote"
    job = pytorch_job(name)
    job["spec"]["runPolicy"] = {"managedBy": K.MANAGED_BY_MULTIKUEUE}
    created = cluster.create(job, queue=open_queue.local_queue)
    assert created["spec"]["runPolicy"]["managedBy"] == K.MANAGED_BY_MULTIKUEUE
    # The operator handles a job of its own in the same namespace meanwhile: it is
    # watching, and the other job's silence is its choice.
    cluster.create(pytorch_job("local"), queue=open_queue.local_queue)
    cluster.wait_condition(kind, "local", "Running")
    time.sleep(QUIET_SECONDS)
    left = cluster.get(kind, name) or {}
    assert "status" not in left or not (left["status"] or {}).get("conditions"), left["status"]
    assert cluster.children(left) == []


# Two teams in a cohort ------------------------------------------------------------------


@dataclass(frozen=True)
class Teams:
    a: Cluster
    b: Cluster
    cluster_queue_a: str
    cluster_queue_b: str
    low: str
    high: str


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


@pytest.fixture
def teams(
    kueue_operator: RunningOperator,
    kueue_clients: ClusterClients,
    kueue_namespace: str,
    request: pytest.FixtureRequest,
) -> Iterator[Teams]:
    """Team A (the test's namespace) and team B (a second one), each with a ClusterQueue
    of 8 GPUs in one cohort; A may borrow 8 more. Both preempt lower priorities within
    their queue and reclaim what was lent. Priorities ``low`` (100) and ``high`` (1000).
    The module's operator watches both namespaces."""
    with fresh_namespace(kueue_clients.core_v1, kueue_clients.dyn, request) as namespace_b:
        a, b = Cluster(kueue_clients, kueue_namespace), Cluster(kueue_clients, namespace_b)
        made_a, made_b = Cleanup(a), Cleanup(b)
        try:
            suffix = secrets.token_hex(3)
            flavor, cohort = f"gpu-{suffix}", f"research-{suffix}"
            found = Teams(
                a, b, f"team-a-{suffix}", f"team-b-{suffix}", f"low-{suffix}", f"high-{suffix}"
            )
            made_a.add(_flavor(flavor))
            made_a.add(
                _cluster_queue(found.cluster_queue_a, flavor, gpus=8, cohort=cohort, borrowing=8)
            )
            made_a.add(_cluster_queue(found.cluster_queue_b, flavor, gpus=8, cohort=cohort))
            made_a.add(_local_queue("team-a", found.cluster_queue_a), namespaced=True)
            made_b.add(_local_queue("team-b", found.cluster_queue_b), namespaced=True)
            made_a.add(_priority_class(found.low, 100))
            made_a.add(_priority_class(found.high, 1000))
            _wait_active(a, found.cluster_queue_a)
            _wait_active(a, found.cluster_queue_b)
            yield found
        finally:
            made_b.close()
            made_a.close()


def _gpu_usage(cluster: Cluster, cluster_queue: str) -> dict[str, str]:
    """The ClusterQueue's GPU ``total`` and ``borrowed``, as Kueue reports them."""
    cq = read(cluster.dyn, KUEUE_API, "ClusterQueue", cluster_queue)
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            if resource["name"] == GPU_RESOURCE:
                return {k: str(resource.get(k, "0")) for k in ("total", "borrowed")}
    return {"total": "0", "borrowed": "0"}


def test_two_teams_borrow_in_a_cohort_and_a_higher_priority_job_preempts(teams: Teams) -> None:
    a, b = teams.a, teams.b
    # Team A's low-priority job takes 16 GPUs: its own 8 and 8 lent by team B.
    a.create(pytorch_job("a-low", gpus=8), queue="team-a", priority=teams.low)
    a.wait_condition("PyTorchJob", "a-low", "Running")
    usage = wait_for(
        lambda: _gpu_usage(a, teams.cluster_queue_a),
        lambda u: u["total"] == "16",
        what="team A's usage",
        timeout=WAIT,
    )
    assert usage == {"total": "16", "borrowed": "8"}, usage

    # A high-priority MPIJob of team A preempts it; its pods start only once every pod of
    # the preempted job is gone.
    a.create(mpi_job("a-high", workers=1, gpus=8), queue="team-a", priority=teams.high)
    overlaps: list[tuple[list[str], list[str]]] = []

    def both() -> tuple[dict[str, Any], dict[str, Any]]:
        low, high = a.pods("PyTorchJob", "a-low"), a.pods("MPIJob", "a-high")
        if low and high:
            overlaps.append((sorted(low), sorted(high)))
        return low, high

    wait_for(
        both,
        lambda seen: running(seen[1], {"a-high-worker-0"}),
        what="a-high's worker Running",
        timeout=WAIT,
    )
    assert overlaps == [], overlaps
    evicted = a.wait_workload(
        "PyTorchJob", "a-low", lambda wl: not is_true(wl, "QuotaReserved"), what="preempted"
    )
    assert (condition(evicted, "Preempted") or {}).get("reason") == "InClusterQueue", evicted[
        "status"
    ]
    assert suspended(a.get("PyTorchJob", "a-low") or {})
    a.wait_condition("PyTorchJob", "a-low", "Suspended")

    # Team B's job fits its own quota, free again: admitted at once.
    b.create(pytorch_job("b", gpus=4), queue="team-b")
    b.wait_condition("PyTorchJob", "b", "Running")
    waiting = a.workload("PyTorchJob", "a-low") or {}
    assert not is_true(waiting, "QuotaReserved"), waiting.get("status")

    # Both finish; the preempted job is admitted again, resumes and completes.
    launcher = wait_for(
        lambda: a.launcher_pods("a-high"),
        lambda p: bool(p) and running(p, set(p)),
        what="a-high's launcher Running",
        timeout=WAIT,
    )
    a.exit(sorted(launcher)[0], 0)
    b.exit("b-master-0", 0)
    a.wait_condition("MPIJob", "a-high", "Succeeded")
    b.wait_condition("PyTorchJob", "b", "Succeeded")
    a.wait_workload("PyTorchJob", "a-low", _admitted, what="admitted again")
    wait_for(
        lambda: a.pods("PyTorchJob", "a-low"),
        lambda p: running(p, {"a-low-master-0", "a-low-worker-0"}),
        what="a-low running again",
        timeout=WAIT,
    )
    a.exit("a-low-master-0", 0)
    a.wait_condition("PyTorchJob", "a-low", "Succeeded")


ELASTIC_RUNTIME = "torch-queued-elastic"


def test_an_elastic_trainjob_scaled_past_its_quota_waits_for_quota_with_no_pod_made(
    cluster: Cluster, cleanup: Cleanup
) -> None:
    """What Kueue v0.15.2 does with an admitted TrainJob whose numNodes grows past the
    quota (docs/elastic.md): the job is suspended (its pods go), its Workload of the new
    size waits, and no pod of the new node is ever made; with the quota raised it runs
    again on all three nodes."""
    suffix = secrets.token_hex(3)
    queue = Queue(f"gpu-{suffix}", f"team-{suffix}", "team")
    cleanup.add(_flavor(queue.flavor))
    # Two nodes of 4 GPUs fit; a third does not.
    cleanup.add(_cluster_queue(queue.cluster_queue, queue.flavor, gpus=8))
    cleanup.add(_local_queue(queue.local_queue, queue.cluster_queue), namespaced=True)
    runtime = torch_runtime(
        ELASTIC_RUNTIME,
        cluster.namespace,
        operator_jobs.template("node", gpus=4, tolerate=False),
    )
    runtime["spec"]["mlPolicy"]["torch"] = {"elasticPolicy": {"minNodes": 1, "maxNodes": 4}}
    cleanup.add(runtime, namespaced=True)
    _wait_active(cluster, queue.cluster_queue)
    wait_until_kueue_knows_the_runtime(
        lambda: cluster.create(
            train_job("probe", ELASTIC_RUNTIME, nodes=2), queue=queue.local_queue, dry_run=True
        ),
        ELASTIC_RUNTIME,
    )
    name = "grows"
    cluster.create(train_job(name, ELASTIC_RUNTIME, nodes=2), queue=queue.local_queue)
    first = {f"{name}-node-0-{i}" for i in range(2)}
    wait_for(
        lambda: cluster.pods("TrainJob", name),
        lambda pods: running(pods, first),
        what="the two admitted nodes Running",
        timeout=WAIT,
    )
    group, version, plural = GROUPS["TrainJob"]
    cluster.custom.patch_namespaced_custom_object(
        group,
        version,
        cluster.namespace,
        plural,
        name,
        {"spec": {"trainer": {"numNodes": 3}}},
        _content_type="application/merge-patch+json",
    )
    third = f"{name}-node-0-2"
    seen: set[str] = set()

    def watched() -> dict[str, Any] | None:
        seen.update(cluster.pods("TrainJob", name))
        return cluster.get("TrainJob", name)

    wait_for(watched, lambda j: j is not None and suspended(j), what="Kueue to suspend it")
    deadline = time.monotonic() + QUIET_SECONDS
    while time.monotonic() < deadline:
        watched()
        time.sleep(0.2)
    assert third not in seen, "a pod of the node beyond the quota was made"
    workload = cluster.workload("TrainJob", name)
    assert workload is not None and not _admitted(workload), workload
    # The quota grows: the job is admitted again at its new size and runs on three nodes.
    cluster.dyn.resources.get(api_version=KUEUE_API, kind="ClusterQueue").patch(
        name=queue.cluster_queue,
        body=_cluster_queue(queue.cluster_queue, queue.flavor, gpus=12),
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: cluster.pods("TrainJob", name),
        lambda pods: running(pods, first | {third}),
        what="three nodes Running once the quota allows",
        timeout=WAIT,
    )
