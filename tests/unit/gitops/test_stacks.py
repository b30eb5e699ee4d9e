"""Every stack renders valid, ordered, Argo CD-ready charts; snapshots catch any change."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from kubetrain.constructs.monitoring import (
    AlertThresholds,
    MonitoringProps,
    dashboard_file,
    rules_file,
)
from kubetrain.constructs.objects import chart_manifests
from kubetrain.gitops.render import CHART_ORDER, build_charts, render_charts
from kubetrain.gitops.stack import Stack, load_stacks
from kubetrain.gitops.writer import (
    DASHBOARD_FILE,
    LOCK_FILE,
    RULES_FILE,
    VersionConflict,
    render_files,
    write_version,
)
from kubetrain.manifest import parse_yaml
from tests.conftest import REPO_ROOT
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot

STACKS = load_stacks(root=REPO_ROOT)
EXPECTED = ["a3-mega-tcpxo", "h100-infiniband", "local", "p5-efa"]


def test_example_stacks_exist() -> None:
    assert sorted(STACKS) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_stack_renders_valid_objects_in_chart_order(name: str) -> None:
    stack = STACKS[name]
    charts = render_charts(stack)
    names = [c.name for c in charts]
    assert names == [c for c in CHART_ORDER if c in names]
    assert names[:2] == ["crds", "operator"]
    assert ("gpu-nodes" in names) == bool(stack.node_pools)
    # Kueue's quota ships with the stacks that have GPU pools.
    assert ("queues" in names) == bool(stack.node_pools)
    objects = [o for c in charts for o in c.objects]
    assert_valid(objects)


@pytest.mark.parametrize("name", EXPECTED)
def test_python_side_serialization_is_what_cdk8s_writes(name: str) -> None:
    # kubetrain synth serializes each chart on the Python side (chart_manifests); cdk8s'
    # own Chart.to_json (Node.js: validations, dependency order, callbacks into each
    # object's to_json) must give the very same objects in the same order.
    for chart_name, chart in build_charts(STACKS[name]).items():
        through_node = [dict(o) for o in chart.to_json()]
        assert chart_manifests(chart) == through_node, chart_name


@pytest.mark.parametrize("name", EXPECTED)
def test_stack_matches_snapshot(name: str) -> None:
    stack = STACKS[name]
    files = render_files(stack, render_charts(stack))
    # The CRDs have their own snapshots; the lock only hashes what is shown here.
    shown = {
        p: t for p, t in files.items() if not p.startswith("00-crds/") and p != "manifest.lock.json"
    }
    text = "".join(f"# {path}\n{body}" for path, body in sorted(shown.items()))
    assert_snapshot(f"stacks/{name}.yaml", text)


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    annotations: dict[str, str] = obj["metadata"].get("annotations", {})
    return annotations


def test_sync_waves_and_options() -> None:
    charts = {c.name: c for c in render_charts(STACKS["h100-infiniband"])}
    for wave, name in enumerate(CHART_ORDER):
        for obj in charts[name].objects:
            assert _annotations(obj)["argocd.argoproj.io/sync-wave"] == str(wave)
    for obj in charts["crds"].objects:
        assert (
            _annotations(obj)["argocd.argoproj.io/sync-options"]
            == "ServerSideApply=true,Prune=false"
        )
    # Samples, runtimes and Kueue's objects are custom resources: their CRDs may still be
    # on their way.
    for obj in [*charts["samples"].objects, *charts["runtimes"].objects, *charts["queues"].objects]:
        assert (
            _annotations(obj)["argocd.argoproj.io/sync-options"]
            == "SkipDryRunOnMissingResource=true"
        )
    others = [o for n in ("operator", "gpu-nodes") for o in charts[n].objects]
    assert all("argocd.argoproj.io/sync-options" not in _annotations(o) for o in others)


def test_applications_point_at_the_version_folders() -> None:

    stack = STACKS["local"]
    files = render_files(stack, render_charts(stack))
    apps = {p: parse_yaml(t) for p, t in files.items() if p.startswith("argocd/applications/")}
    assert sorted(apps) == [
        "argocd/applications/local-crds.yaml",
        "argocd/applications/local-operator.yaml",
        "argocd/applications/local-runtimes.yaml",
        "argocd/applications/local-samples.yaml",
    ]
    crds = apps["argocd/applications/local-crds.yaml"]
    assert crds["spec"]["source"]["path"] == "dist/local/0.1.0/00-crds"
    assert crds["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "0"
    assert crds["spec"]["syncPolicy"]["automated"]["prune"] is False
    assert "finalizers" not in crds["metadata"]
    # ServerSideApply is never set on an Application: it breaks sync waves.
    assert all("syncOptions" not in a["spec"]["syncPolicy"] for a in apps.values())
    root = parse_yaml(files["argocd/root-application.yaml"])
    assert root["spec"]["source"]["path"] == "dist/local/0.1.0/argocd/applications"
    top = parse_yaml(files["kustomization.yaml"])
    assert top["resources"] == ["00-crds", "01-operator", "03-runtimes", "04-samples"]


def test_rejects_sample_pool_that_does_not_exist() -> None:
    import dataclasses

    stack = STACKS["local"]
    with pytest.raises(ValueError) as caught:
        Stack(
            name="x",
            version="1.0.0",
            operator=stack.operator,
            samples=dataclasses.replace(stack.samples, node_pool="h100"),
        )
    assert "samples.node_pool ('h100') is not one of the stack's node pools: none defined" in str(
        caught.value
    )


def test_gpu_stack_queues_two_teams_on_its_pool() -> None:
    charts = {c.name: c for c in render_charts(STACKS["h100-infiniband"])}
    objects = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in charts["queues"].objects
    }
    flavor = objects[("ResourceFlavor", None, "h100-ib")]
    pool = next(o for o in charts["gpu-nodes"].objects if o["kind"] == "MPIJob")
    pool_selector = pool["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"]
    assert flavor["spec"]["nodeLabels"] == pool_selector
    for team in ("team-a", "team-b"):
        queue = objects[("ClusterQueue", None, team)]
        assert queue["spec"]["cohortName"] == "h100-ib"
        assert "rdma/ib" in queue["spec"]["resourceGroups"][0]["coveredResources"]
        assert ("Namespace", None, team) in objects
        local = objects[("LocalQueue", team, "default")]
        assert local["spec"]["clusterQueue"] == team
    # The GPU runtime only takes queued TrainJobs.
    kinds = {o["kind"] for o in charts["runtimes"].objects}
    assert "ValidatingAdmissionPolicy" in kinds


def test_rejects_queues_naming_what_the_stack_lacks() -> None:
    import dataclasses

    from kubetrain.gitops.stack import Queues, StackFlavor

    stack = STACKS["h100-infiniband"]
    with pytest.raises(ValueError) as caught:
        dataclasses.replace(stack, queues=Queues(flavors=(StackFlavor("a100"),)))
    assert (
        "queues.flavors: node_pool ('a100') is not one of the stack's node pools: h100-ib"
        in str(caught.value)
    )
    queues = stack.queues
    with pytest.raises(ValueError) as caught:
        dataclasses.replace(stack, queues=dataclasses.replace(queues, flavors=()))
    assert (
        "cluster queue 'team-a': flavor 'h100-ib' is not one of queues.flavors: none defined"
        in (str(caught.value))
    )
    with pytest.raises(ValueError) as caught:
        dataclasses.replace(stack, queues=dataclasses.replace(queues, cluster_queues=()))
    assert "local queue team-a/default: cluster_queue ('team-a') is not one of" in str(caught.value)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"name": "Local"}, "name ('Local') must be a DNS-1123 label"),
        ({"version": "1.0"}, "version ('1.0') must be MAJOR.MINOR.PATCH"),
    ],
    ids=["bad-name", "bad-version"],
)
def test_rejects_bad_stack(props: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"name": "x", "version": "1.0.0", "operator": STACKS["local"].operator}
    with pytest.raises(ValueError) as caught:
        Stack(**{**base, **props})
    assert message in str(caught.value)


def test_a_monitored_stack_ships_its_rules_and_dashboard_as_plain_files(tmp_path: Path) -> None:
    stack = load_stacks()["p5-efa"]
    assert stack.monitoring is not None
    charts = render_charts(stack)
    assert [c.name for c in charts][-1] == "monitoring"
    files = render_files(stack, charts)
    assert parse_yaml(files[RULES_FILE]) == rules_file(stack.monitoring, stack.operator)
    assert json.loads(files[DASHBOARD_FILE]) == dashboard_file(stack.monitoring, stack.operator)
    assert {RULES_FILE, DASHBOARD_FILE} <= set(json.loads(files[LOCK_FILE])["files"])
    # Argo CD syncs the chart folders only: nothing points at files/.
    assert not any("files" in text for path, text in files.items() if path.startswith("argocd/"))
    # The files are part of the immutable version: a threshold changed is a conflict.
    assert not write_version(stack, charts, tmp_path).unchanged
    assert write_version(stack, charts, tmp_path).unchanged
    stricter = dataclasses.replace(
        stack, monitoring=MonitoringProps(alerts=AlertThresholds(pending_seconds=60))
    )
    with pytest.raises(VersionConflict) as err:
        write_version(stricter, render_charts(stricter), tmp_path)
    assert "PrometheusRule kubetrain-system/kubetrain-operator" in str(err.value)


def test_a_stack_without_monitoring_has_no_monitoring_chart_or_files() -> None:
    stack = load_stacks()["local"]
    assert stack.monitoring is None
    files = render_files(stack, render_charts(stack))
    assert not [p for p in files if p.startswith(("files/", "06-monitoring"))]


def test_the_operator_watches_every_pools_unhealthy_conditions_and_taints() -> None:
    """A pool names the health signals of its nodes (a cloud's own GPU health agent); the
    stack's operator moves jobs off any pool's unhealthy node."""
    stack = STACKS["h100-infiniband"]
    (pool,) = stack.node_pools
    quarantined = dataclasses.replace(
        pool,
        unhealthy_conditions=("GpuHealthy", *pool.unhealthy_conditions),
        unhealthy_taints=("example.com/gpu-quarantine",),
    )
    charts = {
        c.name: c for c in render_charts(dataclasses.replace(stack, node_pools=(quarantined,)))
    }
    (deployment,) = [o for o in charts["operator"].objects if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert (
        "--unhealthy-node-conditions=KernelDeadlock,ReadonlyFilesystem,SysLogsXIDError,"
        "SysLogsSXIDError,SysLogsGPUFallenOff,GpuHealthy" in args
    )
    assert "--unhealthy-node-taints=example.com/gpu-quarantine" in args
