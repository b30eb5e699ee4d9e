"""charts/kubetrain/ with the real helm (v3.19.5, built from its Go module by
``make cluster-tools``): it lints strictly; ``helm template`` renders, object by object
and after taking Helm's labels off, what ``kubetrain synth`` renders for the same stack,
and for other values what the constructs render for the same props; bad values are
refused by the schema; the chart installs, upgrades to a bumped stack version and
uninstalls against the local control plane, with the operator started from the installed
Deployment's flags and ServiceAccount driving a sample job to Succeeded."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tarfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.tools import find_tools
from kubetrain.api import keys as K
from kubetrain.constructs.monitoring import MonitoringProps
from kubetrain.controller.config import JOB_KINDS
from kubetrain.gitops.helm import (
    CHART_NAME,
    default_values,
    operator_props,
    strip_helm_labels,
    write_chart,
)
from kubetrain.gitops.helm.template import object_key
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.stack import Stack, load_stacks
from tests.ahead import Ahead
from tests.integration.kube import wait_for
from tests.integration.operator.jobs import Jobs, train_job
from tests.integration.operator.process import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / CHART_NAME


@pytest.fixture(scope="module")
def local() -> Stack:
    return load_stacks(root=ROOT)["local"]


def export_charts(local: Stack, out: Path) -> dict[str, Path]:
    """The charts the last tests template and install: the h100-infiniband stack's, and
    the ``local`` stack's next version, written under ``out``."""
    return {
        "h100-infiniband": write_chart(load_stacks(root=ROOT)["h100-infiniband"], out / "gpu"),
        "local-0.1.1": write_chart(dataclasses.replace(local, version="0.1.1"), out / "bumped"),
    }


@pytest.fixture(scope="module", autouse=True)
def exported(
    local: Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ahead[dict[str, Path]]]:
    """``export_charts`` from the module's start, in a process of its own
    (``tests/ahead.py``), while the tests before the last ones run."""
    charts = Ahead(export_charts, local, tmp_path_factory.mktemp("charts-ahead"))
    try:
        yield charts
    finally:
        charts.stop()


@pytest.fixture
def helm(tmp_path: Path) -> Any:
    """Run the real helm with its config, cache and data homes in the test's tmp dir."""
    env = dict(os.environ)
    for name in ("HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"):
        env[name] = str(tmp_path / "helm-home" / name.lower())
    binary = str(find_tools().helm)

    def run(*args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        extra = ["-f", "-"] if values is not None else []
        return subprocess.run(
            [binary, *args, *extra],
            input=yaml.safe_dump(values) if values is not None else None,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    return run


def _by_key(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {object_key(o): o for o in objects}


def _template(helm: Any, values: dict[str, Any], *args: str) -> dict[str, dict[str, Any]]:
    done = helm("template", "rel", str(CHART), *args, values=values)
    assert done.returncode == 0, done.stderr
    return _by_key([strip_helm_labels(o) for o in yaml.safe_load_all(done.stdout) if o])


def test_the_chart_lints_strictly(helm: Any) -> None:
    done = helm("lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_default_values_render_what_synth_renders(helm: Any, local: Stack) -> None:
    charts = {c.name: c.objects for c in render_charts(local)}
    rendered = _template(helm, {}, "--include-crds")
    expected = [o for name, objs in charts.items() if name != "samples" for o in objs]
    assert rendered == _by_key(expected)
    # Every object carries Helm's labels (they are what the comparison took off).
    done = helm("template", "rel", str(CHART))
    for obj in yaml.safe_load_all(done.stdout):
        if obj:
            assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
            assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "rel"
    with_samples = _template(helm, {"samples": {"enabled": True}}, "--include-crds")
    assert with_samples == _by_key([o for objs in charts.values() for o in objs])
    # monitoring.enabled adds what the monitoring chart of the same stack with
    # MonitoringProps() synthesizes (ServiceMonitor, PrometheusRule, dashboard ConfigMap).
    monitored = dataclasses.replace(local, monitoring=MonitoringProps())
    (monitoring,) = render_charts(monitored, only=("monitoring",))
    assert [o["kind"] for o in monitoring.objects] == [
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
    ]
    with_monitoring = _template(helm, {"monitoring": {"enabled": True}}, "--include-crds")
    assert with_monitoring == _by_key([*expected, *monitoring.objects])


def only(*kinds: str) -> dict[str, bool]:
    """The ``kinds`` value turning on ``kinds`` and every other kind off."""
    return {kind: kind in kinds for kind in JOB_KINDS}


VALUE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("watch-two-namespaces", {"watchNamespaces": ["team-a", "team-b"]}),
    (
        "watch-one-namespace-pytorch-only",
        {
            "watchNamespaces": ["ml"],
            "kinds": only("PyTorchJob"),
        },
    ),
    ("three-replicas", {"replicas": 3}),
    ("leader-election-one-replica", {"leaderElect": True, "leaderElectionId": "my-lease"}),
    (
        "mpi-and-trainjob",
        {
            "kinds": only("MPIJob", "TrainJob"),
        },
    ),
    (
        "image-by-digest",
        {
            "image": {
                "repository": "registry.example/ops/kubetrain",
                "tag": "",
                "digest": "sha256:" + "ab" * 32,
            },
        },
    ),
    (
        "image-tag-and-digest",
        {
            "image": {
                "repository": "registry.example/kubetrain",
                "tag": "1.2",
                "digest": "sha256:" + "cd" * 32,
            },
        },
    ),
    (
        "resources",
        {
            "resources": {"cpu": "", "memory": "1Gi", "cpuLimit": "2", "memoryLimit": ""},
        },
    ),
    (
        "placement",
        {
            "nodeSelector": {"node-role.kubernetes.io/system": "true", "zone": "a"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"},
                {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
        },
    ),
    (
        "flags",
        {
            "logLevel": "debug",
            "metricsPort": 9100,
            "workers": 8,
            "kubeApiQps": 12.5,
            "kubeApiBurst": 25,
            "startupTimeoutSeconds": 120,
            "successGraceSeconds": 0,
            "eventQps": 2.5,
        },
    ),
    ("gang-volcano", {"gangScheduler": "volcano"}),
    (
        "gang-scheduler-plugins-one-namespace",
        {"gangScheduler": "scheduler-plugins", "watchNamespaces": ["ml"]},
    ),
    (
        "everything-at-once",
        {
            "replicas": 2,
            "watchNamespaces": ["a"],
            "logLevel": "warning",
            "metricsPort": 9200,
            "nodeSelector": {"pool": "system"},
            "kinds": only("PyTorchJob", "TFJob"),
        },
    ),
]


def _construct_renders(local: Stack, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the constructs render for the props ``values`` stand for."""
    props = operator_props(local.operator, {**default_values(local.operator), **values})
    charts = render_charts(
        dataclasses.replace(local, operator=props), only=("operator", "runtimes")
    )
    return _by_key([o for c in charts for o in c.objects])


@pytest.mark.parametrize(("case", "values"), VALUE_CASES, ids=[c for c, _ in VALUE_CASES])
def test_values_render_what_the_construct_renders_for_the_same_props(
    helm: Any, local: Stack, case: str, values: dict[str, Any]
) -> None:
    assert _template(helm, values) == _construct_renders(local, values)


# Every choice that adds or drops RBAC rules, objects and flags: the sets of kinds, cluster-
# wide or one namespace, each gang scheduler. The template writes each such item once
# behind a condition found from renders of every combination; the real helm evaluates
# those conditions here. The sets of kinds are each kind alone, all but one, and all: every
# kind is seen on with the others off and off with the others on, which flips each
# literal of a condition (``if or $.Values.kinds.MPIJob $.Values.kinds.TrainJob``, ``and``
# with ``not $.Values.watchNamespaces``) both ways, in 15 sets where every subset of seven
# kinds would be 127.
KIND_SETS = [
    *((kind,) for kind in JOB_KINDS),
    *(tuple(k for k in JOB_KINDS if k != left_out) for left_out in JOB_KINDS),
    tuple(JOB_KINDS),
]
SHAPES = [
    (kinds, namespaces, gang)
    for kinds in KIND_SETS
    for namespaces in ((), ("ml",))
    for gang in ("none", "scheduler-plugins", "volcano")
]


def test_the_kind_sets_turn_each_kind_on_alone_and_off_alone() -> None:
    assert len(set(KIND_SETS)) == 2 * len(JOB_KINDS) + 1
    for kind in JOB_KINDS:
        assert (kind,) in KIND_SETS
        assert tuple(k for k in JOB_KINDS if k != kind) in KIND_SETS


@pytest.mark.parametrize(
    ("kinds", "namespaces", "gang"),
    SHAPES,
    ids=[f"{'+'.join(k)}-{'ns' if n else 'cluster'}-{g}" for k, n, g in SHAPES],
)
def test_every_shape_of_rbac_and_flags_renders_what_the_construct_renders(
    helm: Any, local: Stack, kinds: tuple[str, ...], namespaces: tuple[str, ...], gang: str
) -> None:
    values = {
        "kinds": {kind: kind in kinds for kind in JOB_KINDS},
        "watchNamespaces": list(namespaces),
        "gangScheduler": gang,
    }
    assert _template(helm, values) == _construct_renders(local, values)


# Replicas and leader election are their own group in the generator (rendered with the
# others at their defaults): crossed here with the namespaces and the progress server,
# the template must still give what the constructs give.
LEADER_SHAPES = [
    (replicas, elect, namespaces, progress)
    for replicas in (1, 3)
    for elect in (False, True)
    for namespaces in ((), ("ml",))
    for progress in (False, True)
]


@pytest.mark.parametrize(
    ("replicas", "elect", "namespaces", "progress"),
    LEADER_SHAPES,
    ids=[
        "-".join(
            (f"r{r}", "elect" if e else "single", "ns" if n else "cluster", "pro" if p else "no")
        )
        for r, e, n, p in LEADER_SHAPES
    ],
)
def test_leader_election_crossed_with_the_rbac_choices_renders_what_the_construct_renders(
    helm: Any,
    local: Stack,
    replicas: int,
    elect: bool,
    namespaces: tuple[str, ...],
    progress: bool,
) -> None:
    values = {
        "replicas": replicas,
        "leaderElect": elect,
        "watchNamespaces": list(namespaces),
        "progressServer": progress,
    }
    assert _template(helm, values) == _construct_renders(local, values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicas": 11}, "/replicas"),
        ({"metricsPort": 80}, "/metricsPort"),
        ({"logLevel": "verbose"}, "/logLevel"),
        ({"watchNamespaces": ["Not_A_Name"]}, "/watchNamespaces/0"),
        ({"kinds": only()}, "/kinds"),
        ({"image": {"repository": "ghcr.io/x", "tag": "latest", "digest": ""}}, "/image"),
        ({"replicaCount": 2}, "replicaCount"),
    ],
    ids=["replicas", "port", "log-level", "namespace", "no-kind", "latest", "unknown"],
)
def test_rejects_bad_values_with_the_schemas_message(
    helm: Any, values: dict[str, Any], message: str
) -> None:
    done = helm("template", "rel", str(CHART), values=values)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert message in done.stderr, done.stderr


def test_helm_package_writes_the_versions_archive(helm: Any, local: Stack, tmp_path: Path) -> None:
    done = helm("package", str(CHART), "-d", str(tmp_path))
    assert done.returncode == 0, done.stderr
    archive = tmp_path / f"{CHART_NAME}-{local.version}.tgz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        chart = yaml.safe_load(tar.extractfile(f"{CHART_NAME}/Chart.yaml").read())  # type: ignore[union-attr]
    assert chart["version"] == local.version
    assert f"{CHART_NAME}/values.schema.json" in names
    assert f"{CHART_NAME}/crds/pytorchjobs.kubeflow.org.yaml" in names


def test_a_gpu_stacks_chart_renders_its_runtimes_and_leaves_the_queues_out(
    helm: Any, exported: Ahead[dict[str, Path]]
) -> None:
    # The chart renders the operator from the stack without its node pools; the queues
    # name those pools, so they go too (Kueue's objects need Kueue installed).
    stack = load_stacks(root=ROOT)["h100-infiniband"]
    charts = {c.name: c.objects for c in render_charts(stack)}
    assert charts["queues"], "the stack has queues: the test would prove nothing"
    chart = exported.result()["h100-infiniband"]
    done = helm("template", "rel", str(chart), "--include-crds")
    assert done.returncode == 0, done.stderr
    rendered = _by_key([strip_helm_labels(o) for o in yaml.safe_load_all(done.stdout) if o])
    assert _by_key(charts["runtimes"]).items() <= rendered.items()
    assert _by_key(charts["gpu-nodes"]).items() <= rendered.items()
    assert not [k for k, o in rendered.items() if o["apiVersion"].startswith("kueue.x-k8s.io")]


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
    exported: Ahead[dict[str, Path]],
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
        chart = exported.result()["local-0.1.1"]
        done = helm(
            "upgrade", "kubetrain", str(chart), *kube, "--set", f"watchNamespaces={{{namespace}}}"
        )
        assert done.returncode == 0, done.stderr
        status = helm("list", *kube, "-o", "yaml")
        (release,) = yaml.safe_load(status.stdout)
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
