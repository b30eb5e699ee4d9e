"""charts/kubetrain/ with the real helm against the local control plane: it installs,
upgrades to a bumped stack version and uninstalls, with the operator started from the
installed Deployment's flags and ServiceAccount driving a sample job to Succeeded.
(``helm lint`` and ``helm template`` without a cluster: tests/tools/test_helm_chart.py.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.api import keys as K
from kubetrain.gitops.helm import CHART_NAME
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.stack import Stack, load_stacks
from kubetrain.manifest import parse_yaml
from tests.ahead import Ahead
from tests.charts import exported_chart
from tests.integration.kube import wait_for
from tests.integration.operator.jobs import Jobs, train_job
from tests.integration.operator.process import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / CHART_NAME


@pytest.fixture(scope="module")
def local() -> Stack:
    return load_stacks(root=ROOT)["local"]


@pytest.fixture(scope="module", autouse=True)
def bumped_chart(local: Stack) -> Iterator[Ahead[Path]]:
    """The ``local`` stack's next version's chart (``tests/charts.py``), from the module's
    start in a process of its own (``tests/ahead.py``)."""
    chart = Ahead(exported_chart, dataclasses.replace(local, version="0.1.1"))
    try:
        yield chart
    finally:
        chart.stop()


# --- install, upgrade, uninstall --------------------------------------------------------


def _gone_or_active(core_v1: client.CoreV1Api, name: str) -> bool:
    try:
        ns = core_v1.read_namespace(name)
    except client.ApiException as exc:
        return bool(exc.status == 404)
    return bool(ns.status and ns.status.phase == "Active")


def _deployment(apps: client.AppsV1Api, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = apps.api_client.sanitize_for_serialization(
            apps.read_namespaced_deployment(name, namespace)
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def _annotations(custom: client.CustomObjectsApi, runtime: str) -> dict[str, str]:
    obj = custom.get_cluster_custom_object(
        "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime
    )
    assert isinstance(obj, dict)
    return dict(obj["metadata"].get("annotations") or {})


def test_install_upgrade_uninstall_with_the_operator_from_the_installed_config(
    helm: Any,
    local: Stack,
    kubeconfig: Path,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
    bumped_chart: Ahead[Path],
) -> None:
    ops_ns, name = local.operator.namespace, local.operator.name
    # Other tests apply and delete the stack: their namespaces must be gone or usable.
    for ns in (ops_ns, "kubeflow-system"):
        wait_for(partial(_gone_or_active, core_v1, ns), bool, what=f"namespace {ns}")
    sample = next(o for c in render_charts(local, only=("samples",)) for o in c.objects)
    sample_ns, sample_name = (
        sample["metadata"].get("namespace", "default"),
        sample["metadata"]["name"],
    )
    kube = ["--kubeconfig", str(kubeconfig), "--namespace", namespace]
    done = helm("install", "kubetrain", str(CHART), *kube, "--set", "samples.enabled=true")
    assert done.returncode == 0, done.stderr
    apps = client.AppsV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    operator: OperatorProcess | None = None
    try:
        deployment = _deployment(apps, ops_ns, name)
        assert deployment is not None
        assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        # The operator as the installed ServiceAccount, with the installed flags.
        operator = OperatorProcess.as_deployed(
            kubeconfig, deployment, tmp_path / "operator.log"
        ).start()
        jobs = Jobs(api_client, sample_ns)
        kind = sample["kind"]
        jobs.wait_condition(kind, sample_name, "Running", timeout=90)
        for pod_name in sorted(jobs.pods(sample_name)):
            jobs.exit(pod_name, 0)
        jobs.wait_condition(kind, sample_name, "Succeeded", timeout=90)
        # A TrainJob on the chart's torch-distributed stays until after the uninstall:
        # the operator marks that runtime in use.
        trainjob = train_job("uses-chart-runtime", "torch-distributed", nodes=1)
        trainjob["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
        custom.create_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", trainjob
        )
        wait_for(
            lambda: _annotations(custom, "torch-distributed"),
            lambda found: K.RUNTIME_IN_USE_ANNOTATION in found,
            what="torch-distributed marked in use",
        )

        # Upgrade to the next version of the stack, watching one namespace only.
        chart = bumped_chart.result()
        done = helm(
            "upgrade", "kubetrain", str(chart), *kube, "--set", f"watchNamespaces={{{namespace}}}"
        )
        assert done.returncode == 0, done.stderr
        status = helm("list", *kube, "-o", "yaml")
        (release,) = parse_yaml(status.stdout)
        assert release["chart"] == f"{CHART_NAME}-0.1.1" and str(release["revision"]) == "2", (
            release
        )
        upgraded = _deployment(apps, ops_ns, name)
        assert upgraded is not None
        assert (
            f"--namespace={namespace}"
            in upgraded["spec"]["template"]["spec"]["containers"][0]["args"]
        )
        rbac = client.RbacAuthorizationV1Api(api_client)
        role = rbac.read_namespaced_role(name, namespace)
        assert role.metadata is not None and role.metadata.name == name
    finally:
        if operator is not None:
            operator.stop()
        done = helm("uninstall", "kubetrain", *kube, "--wait")
    assert done.returncode == 0, done.stderr
    assert _deployment(apps, ops_ns, name) is None
    # The operator is gone and a TrainJob still names a runtime marked in use: Helm deletes
    # the Deployment first, so the runtime-protection policy lets every runtime go, and
    # none is left Terminating (as kubetrain 0.1's finalizer left them).
    runtimes = custom.list_cluster_custom_object(
        "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"
    )
    assert isinstance(runtimes, dict)
    installed = {
        o["metadata"]["name"]
        for c in render_charts(local, only=("runtimes",))
        for o in c.objects
        if o["kind"] == "ClusterTrainingRuntime"
    }
    assert "torch-distributed" in installed
    assert installed & {r["metadata"]["name"] for r in runtimes["items"]} == set()
    # Helm never deletes what crds/ installed: the jobs' CRDs stay.
    ext = client.ApiextensionsV1Api(api_client)
    crd = ext.read_custom_resource_definition("pytorchjobs.kubeflow.org")
    assert crd.metadata is not None and crd.metadata.name == "pytorchjobs.kubeflow.org"
    assert helm("list", *kube, "-q").stdout.strip() == ""
