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
from kubetrain.api.kinds import OPERATOR_KINDS
from kubetrain.controller.config import LogLevel
from kubetrain.gitops.stack import Samples, Stack
from kubetrain.manifest import parse_yaml
from stacks.local import STACK
from tests.builders.jobs import GPU_TOLERATION
from tests.charts import exported_chart
from tests.clusters import ClusterClients
from tests.integration.kube import list_objects, read, wait_for
from tests.integration.operator.jobs import (
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
from tests.realnode.workloads import OPERATOR_NAMESPACE

#: Every job kind the operator serves: (group, version).
JOB_GROUPS = {kind: (info.group, info.version) for kind, info in OPERATOR_KINDS.items()}
#: The TrainJobs' runtime (a TrainingRuntime in the jobs' namespace).
RUNTIME = "fleet-torch"
#: Jobs of each kind kept running through an upgrade: five of the kinds most clusters run,
#: one of the others (what proves the upgrade leaves each kind alone).
FLEET = {"PyTorchJob": 5, "TFJob": 5, "MPIJob": 5, "TrainJob": 5}
FLEET_OTHERS = 1
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
    for key, specs in job["spec"].items():
        if key.endswith("ReplicaSpecs"):
            for replica in specs.values():
                replica["template"] = place_on_gpu_nodes(replica["template"])
    return job


#: The name prefix of each kind's jobs (``pt-a``, ``xgb-a``...).
PREFIXES = {
    "PyTorchJob": "pt",
    "TFJob": "tf",
    "MPIJob": "mpi",
    "TrainJob": "tj",
    "XGBoostJob": "xgb",
    "PaddleJob": "pd",
    "JAXJob": "jax",
}


def one_job(kind: str, suffix: str, namespace: str) -> dict[str, Any]:
    """A job of ``kind`` named ``<prefix>-<suffix>`` on the GPU nodes in ``namespace``,
    one pod per replica type (the TrainJob: one node on ``gpu_runtime``)."""
    name = f"{PREFIXES[kind]}-{suffix}"
    make = {
        "PyTorchJob": lambda: pytorch_job(name, workers=1, restart_policy="Never"),
        "TFJob": lambda: tf_job(name, workers=1, ps=0),
        "MPIJob": lambda: mpi_job(name, workers=1),
        "TrainJob": lambda: train_job(name, RUNTIME, nodes=1),
        "XGBoostJob": lambda: xgboost_job(name, workers=1),
        "PaddleJob": lambda: paddle_job(name, workers=1),
        "JAXJob": lambda: jax_job(name, workers=1),
    }
    job = on_gpu_nodes(make[kind]())
    job["metadata"]["namespace"] = namespace
    return job


def jobs_of_every_kind(suffix: str, namespace: str) -> list[dict[str, Any]]:
    """One job of each of the seven kinds in ``namespace``: 11 pods in all."""
    return [one_job(kind, suffix, namespace) for kind in JOB_GROUPS]


def pods_of(job: dict[str, Any]) -> int:
    """How many pods ``job`` runs: its replicas (a TrainJob's nodes)."""
    if job["kind"] == "TrainJob":
        return int(job["spec"]["trainer"]["numNodes"])
    return sum(
        int(replica.get("replicas", 1))
        for key, specs in job["spec"].items()
        if key.endswith("ReplicaSpecs")
        for replica in specs.values()
    )


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
    """``FLEET``'s jobs of each kind (``FLEET_OTHERS`` of the others) in a new ``namespace``,
    applied with kubectl; returns their snapshot once every job runs and every pod exists."""
    cluster.kubectl("create", "namespace", namespace)
    jobs = [
        one_job(kind, f"u{i}", namespace)
        for kind in JOB_GROUPS
        for i in range(FLEET.get(kind, FLEET_OTHERS))
    ]
    objects = [gpu_runtime(namespace), *jobs]
    cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))
    count = len(jobs)
    # A TrainJob has no Running condition (its state says so): the v1 kinds do.
    v1_jobs = sum(1 for job in jobs if job["kind"] != "TrainJob")
    pods = sum(pods_of(job) for job in jobs)

    def ready(seen: dict[str, Any]) -> bool:
        running = [c for _, c in seen["jobs"].values() if c.get("Running") == "True"]
        return len(seen["jobs"]) == count and len(running) == v1_jobs and len(seen["pods"]) == pods

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
