"""charts/kubetrain/ with the real helm (v3.19.5, built from its Go module by
``make cluster-tools``): it lints strictly; ``helm template`` renders, object by object
and after taking Helm's labels off, what ``kubetrain synth`` renders for the same stack,
and for other values what the constructs render for the same props; bad values are
refused by the schema. (It installs, upgrades and uninstalls against a control plane in
tests/integration/test_helm_install.py.)"""

from __future__ import annotations

import dataclasses
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.constructs.monitoring import MonitoringProps
from kubetrain.controller.config import JOB_KINDS
from kubetrain.gitops.helm import (
    CHART_NAME,
    default_values,
    operator_props,
    strip_helm_labels,
)
from kubetrain.gitops.helm.template import object_key
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.stack import Stack, load_stacks
from kubetrain.manifest import parse_yaml, parse_yaml_all
from tests.ahead import Ahead
from tests.charts import exported_chart

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / CHART_NAME


@pytest.fixture(scope="module")
def local() -> Stack:
    return load_stacks(root=ROOT)["local"]


@pytest.fixture(scope="module", autouse=True)
def exported() -> Iterator[Ahead[Path]]:
    """The h100-infiniband stack's chart (``tests/charts.py``) from the module's start, in
    a process of its own (``tests/ahead.py``), while the tests before the last one run."""
    chart = Ahead(exported_chart, load_stacks(root=ROOT)["h100-infiniband"])
    try:
        yield chart
    finally:
        chart.stop()


def _by_key(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {object_key(o): o for o in objects}


def _template(helm: Any, values: dict[str, Any], *args: str) -> dict[str, dict[str, Any]]:
    done = helm("template", "rel", str(CHART), *args, values=values)
    assert done.returncode == 0, done.stderr
    return _by_key([strip_helm_labels(o) for o in parse_yaml_all(done.stdout) if o])


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
    for obj in parse_yaml_all(done.stdout):
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
        chart = parse_yaml(tar.extractfile(f"{CHART_NAME}/Chart.yaml").read())  # type: ignore[union-attr]
    assert chart["version"] == local.version
    assert f"{CHART_NAME}/values.schema.json" in names
    assert f"{CHART_NAME}/crds/pytorchjobs.kubeflow.org.yaml" in names


def test_a_gpu_stacks_chart_renders_its_runtimes_and_leaves_the_queues_out(
    helm: Any, exported: Ahead[Path]
) -> None:
    # The chart renders the operator from the stack without its node pools; the queues
    # name those pools, so they go too (Kueue's objects need Kueue installed).
    stack = load_stacks(root=ROOT)["h100-infiniband"]
    charts = {c.name: c.objects for c in render_charts(stack)}
    assert charts["queues"], "the stack has queues: the test would prove nothing"
    chart = exported.result()
    done = helm("template", "rel", str(chart), "--include-crds")
    assert done.returncode == 0, done.stderr
    rendered = _by_key([strip_helm_labels(o) for o in parse_yaml_all(done.stdout) if o])
    assert _by_key(charts["runtimes"]).items() <= rendered.items()
    assert _by_key(charts["gpu-nodes"]).items() <= rendered.items()
    assert not [k for k, o in rendered.items() if o["apiVersion"].startswith("kueue.x-k8s.io")]
