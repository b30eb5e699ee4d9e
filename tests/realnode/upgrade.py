"""What the upgrade tests of the real-node tier share (Argo CD's and Helm's): a fleet of
jobs of every kind kept running on kwok's GPU nodes through an upgrade, a snapshot of
them to compare before and after, the operator's pods and Lease holder, and the stack
bumped the way the tests bump it.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import yaml

from cluster.local import LocalCluster
from cluster.topology import POOL_LABEL
from kubetrain.controller.config import LogLevel
from kubetrain.gitops.stack import Samples, Stack
from kubetrain.manifest import parse_yaml
from stacks.local import STACK
from tests.builders.jobs import GPU_TOLERATION
from tests.charts import exported_chart
from tests.clusters import ClusterClients
from tests.integration.kube import list_objects, read, wait_for
from tests.integration.operator.jobs import (
    mpi_job,
    pytorch_job,
    template,
    tf_job,
    torch_runtime,
    train_job,
)
from tests.realnode.workloads import OPERATOR_NAMESPACE

JOB_GROUPS = {
    "PyTorchJob": ("kubeflow.org", "v1"),
    "TFJob": ("kubeflow.org", "v1"),
    "MPIJob": ("kubeflow.org", "v2beta1"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1"),
}
#: The TrainJobs' runtime (a TrainingRuntime in the jobs' namespace).
RUNTIME = "fleet-torch"
#: Jobs of each kind kept running through an upgrade.
JOBS_PER_KIND = 5
#: The property an upgrade adds to the PyTorchJob CRD's spec.
NEW_FIELD = "gitopsNote"
WAIT = 240.0


def place_on_gpu_nodes(pod_template: dict[str, Any]) -> dict[str, Any]:
    """A pod template put on kwok's GPU nodes (tolerating their taint), so the test
    drives its pods' lives; no GPU requested, so many jobs fit."""
    pod_template = copy.deepcopy(pod_template)
    spec = pod_template["spec"]
    spec["nodeSelector"] = {POOL_LABEL: "gpu"}
    spec["tolerations"] = [GPU_TOLERATION]
    for container in spec["containers"]:
        container.get("resources", {}).pop("limits", None)
    return pod_template


def on_gpu_nodes(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with every replica's pods placed by ``place_on_gpu_nodes``."""
    job = copy.deepcopy(job)
    for specs in ("pytorchReplicaSpecs", "tfReplicaSpecs", "mpiReplicaSpecs"):
        for replica in job["spec"].get(specs, {}).values():
            replica["template"] = place_on_gpu_nodes(replica["template"])
    return job


def jobs_of_every_kind(suffix: str, namespace: str) -> list[dict[str, Any]]:
    """One job of each kind on the GPU nodes in ``namespace`` (the TrainJob on
    ``gpu_runtime``): 7 pods in all."""
    jobs = [
        on_gpu_nodes(pytorch_job(f"pt-{suffix}", workers=1, restart_policy="Never")),
        on_gpu_nodes(tf_job(f"tf-{suffix}", workers=1, ps=0)),
        on_gpu_nodes(mpi_job(f"mpi-{suffix}", workers=1)),
        train_job(f"tj-{suffix}", RUNTIME, nodes=1),
    ]
    for job in jobs:
        job["metadata"]["namespace"] = namespace
    return jobs


def gpu_runtime(namespace: str) -> dict[str, Any]:
    """The TrainJobs' runtime: one node pod on the GPU nodes."""
    return torch_runtime(RUNTIME, namespace, place_on_gpu_nodes(template("node", gpus=0)))


def snapshot(clients: ClusterClients, namespace: str) -> dict[str, Any]:
    """Each job's uid and conditions, and each pod's uid, by name."""
    jobs: dict[str, Any] = {}
    for kind, (group, version) in JOB_GROUPS.items():
        for job in list_objects(clients.dyn, f"{group}/{version}", kind, namespace=namespace):
            conditions = {
                c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions", [])
            }
            jobs[f"{kind}/{job['metadata']['name']}"] = (job["metadata"]["uid"], conditions)
    pods = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in list_objects(clients.dyn, "v1", "Pod", namespace=namespace)
    }
    return {"jobs": jobs, "pods": pods}


def start_fleet(cluster: LocalCluster, clients: ClusterClients, namespace: str) -> dict[str, Any]:
    """``JOBS_PER_KIND`` jobs of each kind in a new ``namespace``, applied with kubectl;
    returns their snapshot once every job runs and every pod exists."""
    cluster.kubectl("create", "namespace", namespace)
    objects = [gpu_runtime(namespace)]
    for i in range(JOBS_PER_KIND):
        objects += jobs_of_every_kind(f"u{i}", namespace)
    cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))
    count = len(JOB_GROUPS) * JOBS_PER_KIND

    def ready(seen: dict[str, Any]) -> bool:
        running = [c for _, c in seen["jobs"].values() if c.get("Running") == "True"]
        # A TrainJob has no Running condition (its state says so): the v1 kinds do.
        return (
            len(seen["jobs"]) == count
            and len(running) == 3 * JOBS_PER_KIND
            and (len(seen["pods"]) == 7 * JOBS_PER_KIND)
        )

    return wait_for(
        lambda: snapshot(clients, namespace),
        ready,
        what=f"{count} jobs running with all their pods",
        timeout=WAIT,
        interval=2.0,
    )


def lease_holder(clients: ClusterClients) -> str:
    """The operator pod holding the leader-election Lease."""
    lease = read(
        clients.dyn, "coordination.k8s.io/v1", "Lease", "kubetrain-operator", OPERATOR_NAMESPACE
    )
    return str(lease["spec"].get("holderIdentity", ""))


def operator_pods(clients: ClusterClients) -> set[str]:
    """The operator's pods not being deleted."""
    pods = list_objects(clients.dyn, "v1", "Pod", namespace=OPERATOR_NAMESPACE)
    return {str(p["metadata"]["name"]) for p in pods if not p["metadata"].get("deletionTimestamp")}


def wait_rolled(clients: ClusterClients, before: set[str]) -> tuple[set[str], str]:
    """Wait until the operator runs as two pods none of which is in ``before`` and one of
    them holds the Lease; return the pods and the holder."""
    rolled = wait_for(
        lambda: operator_pods(clients),
        lambda pods: len(pods) == 2 and not (pods & before),
        what="the operator's Deployment rolled to two new pods",
        timeout=WAIT,
    )
    holder = wait_for(
        lambda: lease_holder(clients),
        lambda h: any(h.startswith(pod) for pod in rolled),
        what=f"one of the new operator pods {sorted(rolled)} holding the Lease",
        timeout=WAIT,
    )
    return rolled, holder


def operator_args(clients: ClusterClients) -> list[str]:
    deployment = read(
        clients.dyn, "apps/v1", "Deployment", "kubetrain-operator", OPERATOR_NAMESPACE
    )
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def helm_stack() -> Stack:
    """The ``local`` stack the Helm upgrade installs: two operator replicas and no
    samples, as in the Argo CD tests."""
    operator = dataclasses.replace(STACK.operator, replicas=2)
    return dataclasses.replace(STACK, operator=operator, samples=Samples())


def write_helm_charts() -> tuple[Path, Path]:
    """The charts of ``helm_stack`` at 0.1.0 and ``bumped`` to 0.1.1 (``tests/charts.py``:
    exported once per content)."""
    stack = helm_stack()
    return exported_chart(stack), exported_chart(bumped(stack, "0.1.1"))


def bumped(stack: Stack, version: str) -> Stack:
    """``stack`` at ``version``: the operator's log level raised to debug (its flags
    change, so its Deployment rolls) and the last runtime removed (it is pruned)."""
    config = dataclasses.replace(stack.operator.config, log_level=LogLevel.DEBUG)
    operator = dataclasses.replace(stack.operator, config=config)
    return dataclasses.replace(
        stack, version=version, operator=operator, runtimes=stack.runtimes[:-1]
    )


def add_crd_field(crd: dict[str, Any], field: dict[str, Any]) -> None:
    """Add property ``NEW_FIELD`` (``field``) to the CRD's spec schema, in place."""
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"][NEW_FIELD] = copy.deepcopy(field)


def served_spec_fields(cluster: LocalCluster, crd: str) -> list[str]:
    found = parse_yaml(cluster.kubectl("get", "crd", crd, "-o", "yaml").stdout)
    schema = found["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return sorted(schema["properties"]["spec"]["properties"])


def runtime_names(cluster: LocalCluster) -> set[str]:
    """Every (Cluster)TrainingRuntime's name."""
    out = cluster.kubectl(
        "get", "clustertrainingruntimes,trainingruntimes", "-A", "-o", "name"
    ).stdout
    return {line.rsplit("/", 1)[-1] for line in out.split()}


def release_runtimes(cluster: LocalCluster) -> None:
    """Take the operator's in-use finalizer off every runtime, for a cleanup after the
    operator is gone (while it runs, it does that itself once no TrainJob uses one)."""
    out = cluster.kubectl(
        "get", "clustertrainingruntimes,trainingruntimes", "-A", "-o", "yaml", check=False
    ).stdout
    for runtime in (parse_yaml(out) or {}).get("items", []):
        if not runtime["metadata"].get("finalizers"):
            continue
        where = (
            ["-n", runtime["metadata"]["namespace"]] if "namespace" in runtime["metadata"] else []
        )
        cluster.kubectl(
            *where,
            "patch",
            f"{runtime['kind'].lower()}.trainer.kubeflow.org/{runtime['metadata']['name']}",
            "--type",
            "merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
            check=False,
        )


def remove_stack_leftovers(cluster: LocalCluster, *namespaces: str) -> None:
    """Delete ``namespaces`` (the tests' jobs), then whatever of the stack is left: the
    runtimes' finalizers released, kubetrain's CRDs and namespace deleted."""
    if namespaces:
        cluster.kubectl("delete", "namespace", *namespaces, "--ignore-not-found", "--wait=false")
    release_runtimes(cluster)
    for ns in namespaces:
        cluster.kubectl("wait", "--for=delete", f"namespace/{ns}", "--timeout=120s", check=False)
    crds = cluster.kubectl("get", "crd", "-o", "name").stdout.split()
    ours = [c for c in crds if c.endswith("kubeflow.org")]
    if ours:
        cluster.kubectl("delete", "--wait=false", *ours)
        release_runtimes(cluster)
        for crd in ours:
            cluster.kubectl("wait", "--for=delete", crd, "--timeout=120s", check=False)
    cluster.kubectl("delete", "namespace", OPERATOR_NAMESPACE, "--ignore-not-found", "--wait=true")
