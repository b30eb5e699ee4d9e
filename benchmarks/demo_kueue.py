"""Two jobs competing for one GPU quota under the real Kueue: ``make demo-kueue``.

1. starts the local control plane (or reuses the one ``make cluster-up`` started), installs
   kubetrain's CRDs and runs Kueue against it (stopped at the end unless it was running);
2. makes a ResourceFlavor for the GPU pool (its node label and toleration), a ClusterQueue
   of 8 GPUs, a LocalQueue ``team`` in namespace ``kueue-demo`` and two
   WorkloadPriorityClasses, ``batch`` (100) and ``urgent`` (1000);
3. runs the operator in this process, watching that namespace;
4. queues ``nightly`` (a PyTorchJob of 2 x 4 GPUs, priority ``batch``: the whole quota),
   and once it runs, ``hotfix`` (the same shape, priority ``urgent``): Kueue preempts
   ``nightly``, whose pods the operator deletes; only once they are gone does Kueue admit
   ``hotfix``. When ``hotfix`` has finished, ``nightly`` is admitted again, resumes and
   finishes;
5. prints every change of the two jobs and their Workloads, with the time since the start.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from cluster.fake_pods import exit_patch
from cluster.kueue import QUEUE_NAME_LABEL, Kueue
from cluster.local import LocalCluster
from cluster.topology import GPU_RESOURCE, POOL_LABEL
from kubetrain.api import keys as K
from kubetrain.api.crds import all_crds
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.operator import Operator

DEFAULT_WORKDIR = Path("build/cluster")
NAMESPACE = "kueue-demo"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TIMEOUT_SECONDS = 300.0


def queue_objects() -> list[dict[str, Any]]:
    """The flavor, the ClusterQueue, the LocalQueue and the two priority classes."""
    api = "/".join(KUEUE)
    gpus = {"name": GPU_RESOURCE, "nominalQuota": "8"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": "demo-gpu"},
            "spec": {"nodeLabels": {POOL_LABEL: "gpu"}, "tolerations": [GPU_TOLERATION]},
        },
        {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": "demo-gpus"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", GPU_RESOURCE],
                        "flavors": [
                            {
                                "name": "demo-gpu",
                                "resources": [{"name": "cpu", "nominalQuota": "32"}, gpus],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": api,
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "demo-gpus"},
        },
        {
            "apiVersion": api,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "batch"},
            "value": 100,
        },
        {
            "apiVersion": api,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
        },
    ]


def pytorch_job(name: str, priority: str) -> dict[str, Any]:
    """2 pods x 4 GPUs, without the GPU toleration: the flavor brings it."""
    replica = {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "ghcr.io/kubetrain/pytorch-trainer:0.1.0",
                        "resources": {"requests": {"cpu": "1"}, "limits": {GPU_RESOURCE: "4"}},
                    }
                ]
            }
        },
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {QUEUE_NAME_LABEL: "team", PRIORITY_LABEL: priority},
        },
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
    }


class Watcher:
    """Reads the jobs, their pods and Workloads, and prints what changed."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.start = time.monotonic()
        self.last: dict[str, str] = {}

    def job(self, name: str) -> dict[str, Any]:
        found = self.custom.get_namespaced_custom_object(
            "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", name
        )
        assert isinstance(found, dict)
        return found

    def pods(self, name: str) -> list[str]:
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"{K.JOB_NAME}={name}")
        out = []
        for pod in pods.items:
            meta = pod.metadata
            assert meta is not None
            out.append(f"{meta.name}{' (terminating)' if meta.deletion_timestamp else ''}")
        return sorted(out)

    def workload(self, name: str) -> dict[str, Any] | None:
        found: Any = self.custom.list_namespaced_custom_object(*KUEUE, NAMESPACE, "workloads")
        for item in found["items"]:
            owners = item["metadata"].get("ownerReferences") or []
            if any(o["name"] == name for o in owners):
                return dict(item)
        return None

    def state(self, name: str) -> str:
        job = self.job(name)
        conditions = [
            c["type"]
            for c in (job.get("status") or {}).get("conditions") or []
            if c["status"] == "True"
        ]
        suspended = (job["spec"].get("runPolicy") or {}).get("suspend")
        wl = self.workload(name) or {}
        wl_true = [
            c["type"]
            for c in (wl.get("status") or {}).get("conditions") or []
            if c["status"] == "True"
        ]
        return (
            f"suspend={bool(suspended)!s:5} job={','.join(conditions) or '-':28} "
            f"workload={','.join(wl_true) or '-':36} pods={', '.join(self.pods(name)) or '-'}"
        )

    def report(self, *names: str) -> None:
        for name in names:
            try:
                now = self.state(name)
            except ApiException as err:
                if err.status == 404:
                    continue
                raise
            if self.last.get(name) != now:
                self.last[name] = now
                print(f"{time.monotonic() - self.start:6.1f}s {name:8} {now}", flush=True)

    def until(self, what: str, done: Any, *names: str) -> None:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while not done():
            self.report(*names)
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            time.sleep(0.2)
        self.report(*names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = parser.parse_args(argv)

    cluster = LocalCluster(args.workdir)
    started_cluster = not cluster.is_running()
    kueue = Kueue(cluster)
    started_kueue = not kueue.is_running()
    stop = threading.Event()
    try:
        if started_cluster:
            print(f"starting the local control plane in {args.workdir}")
            cluster.up()
        crds = all_crds()
        cluster.kubectl("apply", "--server-side", "-f", "-", input=_json_list(crds))
        names = [crd["metadata"]["name"] for crd in crds]
        cluster.wait_established(names, deadline=time.monotonic() + 60)
        if started_kueue:
            print("starting Kueue")
            kueue.start()
        cluster.kubectl("apply", "--server-side", "-f", "-", input=_json_list(queue_objects()))
        api = KubeApi.connect(str(cluster.kubeconfig), qps=50, burst=100)
        operator = Operator(OperatorConfig(namespaces=(NAMESPACE,)), api, serve_http=False)
        thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
        thread.start()
        if not operator.started.wait(60):
            raise SystemExit("the operator did not start within 60 s")
        print(f"operator running, watching namespace {NAMESPACE}\n")
        demo(config.new_client_from_config(config_file=str(cluster.kubeconfig)))  # type: ignore[no-untyped-call]
        stop.set()
        thread.join(30)
        api.close()
    finally:
        stop.set()
        if started_kueue:
            kueue.stop()
        if started_cluster:
            cluster.down()
    return 0


def _json_list(objects: list[dict[str, Any]]) -> str:
    import json

    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def demo(api_client: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    watch = Watcher(api_client)
    for name in ("nightly", "hotfix"):
        try:
            custom.delete_namespaced_custom_object(
                "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", name
            )
        except ApiException as err:
            if err.status != 404:
                raise
    watch.until(
        "the previous run's jobs gone", lambda: not watch.pods("nightly") + watch.pods("hotfix")
    )

    def has(name: str, condition: str) -> bool:
        try:
            job = watch.job(name)
        except ApiException:
            return False
        return any(
            c["type"] == condition and c["status"] == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )

    print("queue nightly (priority batch, 8 GPUs: the whole quota)")
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", pytorch_job("nightly", "batch")
    )
    watch.until("nightly Running", lambda: has("nightly", "Running"), "nightly")
    print("queue hotfix (priority urgent, 8 GPUs)")
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", NAMESPACE, "pytorchjobs", pytorch_job("hotfix", "urgent")
    )
    watch.until("hotfix Running", lambda: has("hotfix", "Running"), "nightly", "hotfix")
    print("hotfix's master exits 0")
    core.patch_namespaced_pod("hotfix-master-0", NAMESPACE, exit_patch(0))
    watch.until(
        "nightly Running again",
        lambda: has("nightly", "Running") and not has("nightly", "Suspended"),
        "nightly",
        "hotfix",
    )
    print("nightly's master exits 0")
    core.patch_namespaced_pod("nightly-master-0", NAMESPACE, exit_patch(0))
    watch.until("nightly Succeeded", lambda: has("nightly", "Succeeded"), "nightly", "hotfix")
    print("\nboth jobs Succeeded; hotfix ran only after every pod of nightly was gone")


if __name__ == "__main__":
    sys.exit(main())
