"""Elastic TrainJobs on the local control plane with the real operator: a runtime whose
torch policy has an ``elasticPolicy``, a TrainJob of it scaled with ``kubectl scale`` (its
scale subresource), node pods added and removed while the others keep running (same
UIDs), the Events and status saying so, and the unmodified Kubeflow SDK's ``get_job``
showing the new node count."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient

from cluster.local import LocalCluster
from kubetrain.api import keys as K
from kubetrain.constructs import App, Chart
from kubetrain.constructs.trainer_access import TrainerUserAccess
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import GPU_TOLERATION
from tests.conftest import REPO_ROOT
from tests.integration.kube import apply, remove_applied, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of, release_runtimes
from tests.integration.operator.sdk_users import Sdk, scientist_env

TORCH = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes"
GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"


def _elastic_runtime(namespace: str) -> dict[str, Any]:
    """Upstream's torch-distributed as a TrainingRuntime of the test's namespace, elastic
    between 1 and 4 nodes."""
    runtime: dict[str, Any] = parse_yaml((TORCH / "torch_distributed.yaml").read_text())
    out = copy.deepcopy(runtime)
    out["kind"] = "TrainingRuntime"
    out["metadata"] = {**out["metadata"], "name": "torch-elastic", "namespace": namespace}
    out["spec"]["mlPolicy"]["torch"] = {
        "elasticPolicy": {"minNodes": 1, "maxNodes": 4, "maxRestarts": 3}
    }
    for rjob in out["spec"]["template"]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["spec"]["tolerations"] = [GPU_TOLERATION]
    return out


@pytest.fixture
def sdk(
    operator: RunningOperator,
    dyn: DynamicClient,
    jobs: Jobs,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
) -> Iterator[Sdk]:
    """The elastic runtime and a data scientist's SDK (the SDK users' roles)."""
    app = App()
    chart = Chart(app, "sdk-access")
    TrainerUserAccess(chart, "Access")
    objects = chart.to_json()
    for obj in objects:
        apply(dyn, obj)
    apply(dyn, _elastic_runtime(namespace))
    yield Sdk(scientist_env(kubeconfig, namespace, tmp_path))
    # The TrainJobs go first, while the operator runs, so the runtimes are released.
    release_runtimes(jobs)
    remove_applied(dyn, objects)


def _node_pods(jobs: Jobs, name: str) -> dict[str, dict[str, Any]]:
    found = jobs.core.list_namespaced_pod(
        jobs.namespace, label_selector=f"{K.JOBSET_NAME_LABEL}={name}"
    )
    return {
        n: p for n, p in jobs._by_name(found).items() if not p["metadata"].get("deletionTimestamp")
    }


def _uids(pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: str(pod["metadata"]["uid"]) for name, pod in pods.items()}


def _trainjob(jobs: Jobs, name: str) -> dict[str, Any]:
    obj = jobs.custom.get_namespaced_custom_object(GROUP, VERSION, jobs.namespace, PLURAL, name)
    assert isinstance(obj, dict)
    return obj


def _scale(cluster: LocalCluster, namespace: str, name: str, nodes: int, check: bool = True) -> Any:
    return cluster.kubectl(
        "scale", "trainjob", name, f"--replicas={nodes}", "-n", namespace, check=check
    )


def _scale_as(cluster: LocalCluster, kubeconfig: str, name: str, nodes: int) -> None:
    """``kubectl scale`` as the data scientist (the SDK users' role, their namespace)."""
    kubectl = [str(cluster.tools.kubectl), "--kubeconfig", kubeconfig]
    subprocess.run(
        [*kubectl, "scale", "trainjob", name, f"--replicas={nodes}"],
        check=True,
        capture_output=True,
        text=True,
    )


def _running(jobs: Jobs, name: str, count: int) -> dict[str, dict[str, Any]]:
    names = {f"{name}-node-0-{i}" for i in range(count)}
    return wait_for(
        lambda: _node_pods(jobs, name),
        lambda pods: (
            set(pods) == names
            and all((p.get("status") or {}).get("phase") == "Running" for p in pods.values())
        ),
        what=f"node pods {sorted(names)} Running",
    )


def test_kubectl_scale_adds_and_removes_nodes_without_restarting_the_others(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk, local_cluster: LocalCluster, namespace: str
) -> None:
    name = sdk("train-on", "--runtime", "torch-elastic", "--num-nodes", "2")["name"]
    pods = _running(jobs, name, 2)
    uid = _trainjob(jobs, name)["metadata"]["uid"]
    for index in range(2):
        env = env_of(pods[f"{name}-node-0-{index}"], "node")
        assert env["PET_NNODES"] == "1:4"
        assert env["PET_RDZV_BACKEND"] == "c10d"
        assert env["PET_RDZV_ENDPOINT"] == f"{name}-node-0-0.{name}:29500"
        assert env["PET_RDZV_ID"] == uid and env["PET_MAX_RESTARTS"] == "3"
    status = wait_for(
        lambda: _trainjob(jobs, name).get("status") or {},
        lambda s: "elastic" in s,
        what="the elastic status",
    )
    assert status["elastic"] == {"minNodes": 1, "maxNodes": 4}
    assert status["selector"] == (
        f"{K.JOBSET_NAME_LABEL}={name},{K.JOBSET_REPLICATED_JOB_LABEL}=node"
    )
    before = _uids(pods)

    # The data scientist who trained it may scale it (TrainerUserAccess grants the
    # scale subresource).
    _scale_as(local_cluster, sdk.env["KUBECONFIG"], name, 3)
    grown = _running(jobs, name, 3)
    assert {n: u for n, u in _uids(grown).items() if n in before} == before
    assert (
        jobs.wait_event(name, "ScaledUp")["message"]
        == "2 -> 3 nodes (the job's spec: kubectl scale or an edit)"
    )
    assert sdk("get-job", "--name", name)["num_nodes"] == 3
    scale = local_cluster.kubectl(
        "get",
        "--raw",
        f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}/scale",
    )
    reported = wait_for(
        lambda: _trainjob(jobs, name)["status"].get("nodes"), lambda n: n == 3, what="nodes 3"
    )
    assert reported == 3 and '"replicas":3' in scale.stdout.replace(" ", "")

    _scale(local_cluster, namespace, name, 2)
    shrunk = _running(jobs, name, 2)
    assert _uids(shrunk) == before  # the highest index went; the first two never restarted
    assert (
        jobs.wait_event(name, "ScaledDown")["message"]
        == "3 -> 2 nodes (the job's spec: kubectl scale or an edit)"
    )
    assert sdk("get-job", "--name", name)["num_nodes"] == 2

    refused = _scale(local_cluster, namespace, name, 5, check=False)
    assert refused.returncode != 0
    assert "within status.elastic" in refused.stderr, refused.stderr
    assert set(_node_pods(jobs, name)) == set(before)


def test_a_fixed_trainjob_cannot_be_scaled(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk, local_cluster: LocalCluster, namespace: str
) -> None:
    """A TrainJob of a runtime without elasticPolicy keeps upstream's immutable trainer."""
    runtime = _elastic_runtime(namespace)
    runtime["metadata"]["name"] = "torch-fixed"
    runtime["spec"]["mlPolicy"]["torch"] = {}
    jobs.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "trainingruntimes", runtime
    )
    name = sdk("train-on", "--runtime", "torch-fixed", "--num-nodes", "2")["name"]
    pods = _running(jobs, name, 2)
    assert env_of(pods[f"{name}-node-0-0"], "node")["PET_NNODES"] == "2"
    assert "PET_RDZV_ENDPOINT" not in env_of(pods[f"{name}-node-0-0"], "node")
    refused = _scale(local_cluster, namespace, name, 3, check=False)
    assert refused.returncode != 0
    assert "spec.trainer is immutable" in refused.stderr, refused.stderr
    assert "elastic" not in (_trainjob(jobs, name).get("status") or {})
