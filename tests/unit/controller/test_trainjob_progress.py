"""What a TrainJob's pods get when the progress server is on (upstream's TrainJobStatus
runtime plugin): the ConfigMap with the CA bundle, and in the trainer's containers the
SDK's three variables and the projected token + CA volume; an MPIJob's OpenMPI launcher
also forwards the three to its ranks."""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.plugins.progress_env import ProgressInjection
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.plugins.trainjob_plugin import TrainJobPlugin
from kubetrain.controller.reconciler import Reconciler
from tests.builders.jobs import mpi_job
from tests.builders.trainer import torch_runtime
from tests.unit.controller.memory_cluster import MemoryCluster
from tests.unit.controller.test_trainjob import RUNTIME_KEY, trainjob

BUNDLE = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def reconcile(runtime: dict[str, Any], bundle: list[str], times: int = 1) -> MemoryCluster:
    plugins = build_registry(("TrainJob",))
    plugin = plugins["TrainJob"]
    assert isinstance(plugin, TrainJobPlugin)
    plugin.progress = ProgressInjection("https://progress.ops.svc:10443", lambda: bundle[0])
    cluster = MemoryCluster()
    cluster.runtimes[RUNTIME_KEY] = copy.deepcopy(runtime)
    key = cluster.add_job(trainjob())
    reconciler = Reconciler(cluster, cluster, plugins)
    for _ in range(times):
        reconciler.reconcile(key)
        if times > 1:
            bundle[0] += BUNDLE  # the CA rolled over: the bundle carries both
    return cluster


def test_trainer_containers_get_the_sdks_variables_and_the_token_volume() -> None:
    runtime = torch_runtime()
    template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    pod_spec = template["spec"]["template"]["spec"]
    pod_spec["containers"][0]["env"] = [
        {"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": "https://elsewhere"},
        {"name": "KEEP", "value": "1"},
    ]
    pod_spec["containers"].append({"name": "sidecar", "image": "t:1"})
    cluster = reconcile(runtime, [BUNDLE])
    for index in (0, 1):
        spec = cluster.children["Pod"][f"tj-node-0-{index}"]["spec"]
        for container in spec["containers"]:
            env = {e["name"]: e.get("value") for e in container["env"]}
            # Set over the container's own value, as upstream does.
            assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
                "https://progress.ops.svc:10443"
                "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status"
            )
            assert (
                env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
            )
            assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
            assert container["volumeMounts"][-1] == {
                "name": "kubeflow-trainer-token",
                "mountPath": "/var/run/secrets/kubeflow/trainer",
                "readOnly": True,
            }
        assert spec["containers"][0]["env"][0] == {"name": "KEEP", "value": "1"}
        (volume,) = [v for v in spec["volumes"] if v["name"] == "kubeflow-trainer-token"]
        assert volume["projected"]["sources"] == [
            {
                "serviceAccountToken": {
                    # Upstream's audience: a token for this TrainJob only.
                    "audience": "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status",
                    "expirationSeconds": 3600,
                    "path": "token",
                }
            },
            {
                "configMap": {
                    "name": "tj-tls-config",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
        ]


def test_the_ca_bundle_configmap_is_the_servers_and_follows_it() -> None:
    cluster = reconcile(torch_runtime(), [BUNDLE])
    config_map = cluster.children["ConfigMap"]["tj-tls-config"]
    assert config_map["data"] == {"ca.crt": BUNDLE}
    rolled = reconcile(torch_runtime(), [BUNDLE], times=2)
    # Re-applied with the bundle of the second reconcile (the CA changed in between).
    assert rolled.children["ConfigMap"]["tj-tls-config"]["data"] == {"ca.crt": BUNDLE * 2}
    (owner,) = config_map["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "tj", True)


def test_initializer_pods_get_nothing() -> None:
    runtime = torch_runtime()
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    initializer = copy.deepcopy(jobs[0])
    initializer["name"] = "dataset-initializer"
    initializer["template"]["metadata"] = {
        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}
    }
    initializer["template"]["spec"]["template"]["spec"]["containers"] = [
        {"name": "dataset-initializer", "image": "init:1"}
    ]
    jobs.insert(0, initializer)
    jobs[1].setdefault("dependsOn", [{"name": "dataset-initializer", "status": "Complete"}])
    cluster = reconcile(runtime, [BUNDLE])
    made = cluster.children["Pod"]["tj-dataset-initializer-0-0"]
    assert "kubeflow-trainer-token" not in [v["name"] for v in made["spec"].get("volumes") or []]
    names = [e["name"] for c in made["spec"]["containers"] for e in c.get("env") or []]
    assert "KUBEFLOW_TRAINER_SERVER_URL" not in names


def test_nothing_is_injected_when_the_server_is_off() -> None:
    plugins = build_registry(("TrainJob",))
    cluster = MemoryCluster()
    cluster.runtimes[RUNTIME_KEY] = torch_runtime()
    Reconciler(cluster, cluster, plugins).reconcile(cluster.add_job(trainjob()))
    assert "tj-tls-config" not in cluster.children.get("ConfigMap", {})
    spec = cluster.children["Pod"]["tj-node-0-0"]["spec"]
    assert "kubeflow-trainer-token" not in [v["name"] for v in spec.get("volumes") or []]


def test_an_openmpi_launcher_forwards_the_variables_to_the_ranks_it_starts() -> None:
    plugins = build_registry(("MPIJob",))
    plugins["MPIJob"].progress = ProgressInjection("https://p:1", lambda: BUNDLE)
    cluster = MemoryCluster()
    annotations = {K.REPORT_PROGRESS_ANNOTATION: "true"}
    job = mpi_job(name="hv", metadata={"namespace": "ns", "uid": "u1", "annotations": annotations})
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["env"] = [
        {"name": "OMPI_MCA_mca_base_env_list", "value": "MINE;KUBEFLOW_TRAINER_SERVER_URL"}
    ]
    key = cluster.add_job(job)
    Reconciler(cluster, cluster, plugins).reconcile(key)
    pods = cluster.children["Pod"]
    # The launcher is a batch Job's pod, as upstream's mpi-operator runs it.
    pod = cluster.children["Job"]["hv-launcher"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # The user's entries kept, each variable listed once.
    assert env["OMPI_MCA_mca_base_env_list"] == (
        "MINE;KUBEFLOW_TRAINER_SERVER_URL;KUBEFLOW_TRAINER_SERVER_CA_CERT;"
        "KUBEFLOW_TRAINER_SERVER_TOKEN"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_URL"].endswith("/namespaces/ns/mpijobs/hv/status")
    worker = {e["name"] for e in pods["hv-worker-0"]["spec"]["containers"][0]["env"]}
    assert "KUBEFLOW_TRAINER_SERVER_TOKEN" in worker
    assert "OMPI_MCA_mca_base_env_list" not in worker
