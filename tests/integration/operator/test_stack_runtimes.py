"""The ``local`` stack's runtimes as a platform team ships them: rendered by the stack,
applied server-side to the local control plane, listed by the Kubeflow SDK, and a TrainJob
of each, created by ``train(runtime=<name>)``, run to Complete by kubetrain's operator.
The GPU stacks' runtimes are applied too and read back by the SDK (their devices)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from kubetrain.api import keys as K
from kubetrain.synth import render_stack
from tests.conftest import REPO_ROOT
from tests.integration.kube import apply, remove_applied, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs
from tests.integration.operator.sdk_users import Sdk, scientist_env

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
LOCAL = (
    "torch-distributed",
    "torch-ddp-sample",
    "deepspeed-distributed",
    "horovod-distributed",
    "jax-distributed",
    "xgboost-distributed",
    "tensorflow-distributed",
)
MPI = ("deepspeed-distributed", "horovod-distributed")


def _chart(stack: str, name: str) -> list[dict[str, Any]]:
    (chart,) = [c for c in render_stack(stack, root=REPO_ROOT) if c.name == name]
    return chart.objects


def _runtime_names(custom: client.CustomObjectsApi) -> dict[str, dict[str, Any]]:
    found = custom.list_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes")
    assert isinstance(found, dict)
    return {r["metadata"]["name"]: r for r in found["items"]}


@pytest.fixture
def stack_runtimes(
    operator: RunningOperator, jobs: Jobs, dyn: DynamicClient, installed_crds: Any
) -> Iterator[list[dict[str, Any]]]:
    """Every stack's runtimes chart applied server-side (the SDK users' roles with the
    operator chart); removed afterwards, once the operator released them."""
    # The SDK users' roles and public ConfigMap, as the operator chart renders them.
    access = [
        o
        for o in _chart("local", "operator")
        if o["metadata"]["name"].startswith(("kubetrain-trainer-", "kubeflow-"))
    ]
    assert len(access) == 7, [o["metadata"]["name"] for o in access]
    for obj in access:
        apply(dyn, obj)
    applied = [
        o
        for stack in ("local", "h100-infiniband", "p5-efa", "a3-mega-tcpxo")
        for o in _chart(stack, "runtimes")
    ]
    for obj in applied:
        apply(dyn, obj)
    yield applied
    group, version, plural = GROUP, VERSION, "trainjobs"
    jobs.custom.delete_collection_namespaced_custom_object(group, version, jobs.namespace, plural)
    # The GPU runtimes' charts also hold the admission policies that ask their TrainJobs
    # for a queue label (ValidatingAdmissionPolicy and binding): deleted by kind.
    names = {o["metadata"]["name"] for o in applied if o["kind"] == "ClusterTrainingRuntime"}
    for other in (o for o in applied if o["kind"] != "ClusterTrainingRuntime"):
        dyn.resources.get(api_version=other["apiVersion"], kind=other["kind"]).delete(
            name=other["metadata"]["name"], namespace=other["metadata"].get("namespace")
        )
    wait_for(
        lambda: [
            n
            for n, r in _runtime_names(jobs.custom).items()
            if n in names
            and K.RUNTIME_IN_USE_ANNOTATION in (r["metadata"].get("annotations") or {})
        ],
        lambda held: not held,
        what="the stack's runtimes released by the operator",
    )
    for name in names:
        jobs.custom.delete_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", name)
    wait_for(
        lambda: names & set(_runtime_names(jobs.custom)),
        lambda left: not left,
        what="the stack's runtimes deleted",
    )
    remove_applied(dyn, access)


@pytest.fixture
def sdk(
    stack_runtimes: list[dict[str, Any]], kubeconfig: Path, namespace: str, tmp_path: Path
) -> Sdk:
    return Sdk(scientist_env(kubeconfig, namespace, tmp_path))


def _pods(jobs: Jobs, trainjob: str) -> dict[str, dict[str, Any]]:
    found = jobs.core.list_namespaced_pod(
        jobs.namespace, label_selector=f"{K.JOBSET_NAME_LABEL}={trainjob}"
    )
    return jobs._by_name(found)


def test_the_sdk_lists_every_runtime_and_reads_its_device(sdk: Sdk) -> None:
    runtimes = {r["name"]: r for r in sdk("list-runtimes")}
    assert set(LOCAL) <= set(runtimes)
    for name in LOCAL:
        assert runtimes[name]["device"] == "cpu", runtimes[name]
    assert runtimes["torch-distributed"]["framework"] == "torch"
    assert runtimes["tensorflow-distributed"]["framework"] == "tensorflow"
    assert runtimes["deepspeed-distributed"]["framework"] == "deepspeed"
    # The GPU stacks' runtimes: GPUs, RDMA/EFA devices beside them do not break the SDK.
    for name in ("torch-h100-ib", "torch-p5-efa", "torch-a3-mega"):
        assert runtimes[name]["device"] == "gpu", runtimes[name]
        assert runtimes[name]["num_nodes"] == 2


@pytest.mark.parametrize("runtime", LOCAL)
def test_a_trainjob_of_each_local_runtime_completes(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk, runtime: str
) -> None:
    name = sdk("train-on", "--runtime", runtime, "--num-nodes", "2")["name"]
    running = sdk("wait", "--name", name, "--status", "Running")
    assert "job" in running, running
    assert running["job"]["num_nodes"] == 2
    pods = _pods(jobs, name)
    if runtime in MPI:
        # The launcher runs ranks as node-0; the other node serves sshd.
        assert set(pods) == {f"{name}-launcher-0-0", f"{name}-node-0-0"}
        jobs.exit(f"{name}-launcher-0-0", 0)
    else:
        assert set(pods) == {f"{name}-node-0-0", f"{name}-node-0-1"}
        for pod in pods:
            jobs.exit(pod, 0)
    done = sdk("wait", "--name", name, "--status", "Complete")
    assert done.get("job", {}).get("status") == "Complete", done
