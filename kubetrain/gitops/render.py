"""Rendering a stack: its charts (in deployment order) as plain dicts, and the Argo CD
Applications that deploy them."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from kubetrain._jsii import quiet_jsii
from kubetrain.gitops import argocd as argo
from kubetrain.gitops.stack import Stack

# Chart order is deployment order and sync-wave order; folder numbers are fixed per chart
# so a chart keeps its path whichever charts a stack has. A new chart therefore takes the
# next number: inserting one would move the folders and waves of the charts after it in
# every stack, and so change the content of versions that did not change. ``queues``
# (Kueue's objects) comes last: nothing the other charts hold needs it (a runtime's queue
# rule names a queue but needs no queue object; queued jobs wait for their LocalQueue),
# and it needs only Kueue's CRDs, which Kueue's own installation provides. ``monitoring``
# (the operator's ServiceMonitor, alert rules and dashboard) needs the Prometheus
# Operator's CRDs, which its own installation provides.
CHART_ORDER = ("crds", "operator", "gpu-nodes", "runtimes", "samples", "queues", "monitoring")


@dataclass(frozen=True)
class RenderedChart:
    name: str
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def folder(self) -> str:
        return f"{CHART_ORDER.index(self.name):02d}-{self.name}"

    @property
    def wave(self) -> int:
        return CHART_ORDER.index(self.name)


def _annotate(obj: dict[str, Any], annotations: dict[str, str]) -> None:
    meta = obj.setdefault("metadata", {})
    meta["annotations"] = {**meta.get("annotations", {}), **annotations}


def build_charts(stack: Stack, only: Collection[str] = CHART_ORDER) -> dict[str, Any]:
    """The cdk8s charts of ``stack`` (the crds and operator charts only if named in
    ``only``), in one new ``cdk8s.App``, by chart name."""
    quiet_jsii()
    import cdk8s

    from kubetrain.constructs.crds import KubeflowCrdsProps
    from kubetrain.gitops.charts import (
        CrdsChart,
        GpuNodesChart,
        MonitoringChart,
        OperatorChart,
        QueuesChart,
        RuntimesChart,
        SamplesChart,
    )

    app = cdk8s.App()
    charts: dict[str, cdk8s.Chart] = {}
    if "crds" in only:
        charts["crds"] = CrdsChart(
            app,
            "crds",
            KubeflowCrdsProps(annotations={argo.SYNC_OPTIONS_ANNOTATION: argo.CRD_SYNC_OPTIONS}),
        )
    if "operator" in only:
        operator = stack.operator
        for props in stack.node_pools:
            # The operator moves jobs off any pool's unhealthy nodes.
            operator = operator.watching_node_health(
                props.unhealthy_conditions, props.unhealthy_taints
            )
        charts["operator"] = OperatorChart(app, "operator", operator)
    gpu_nodes = GpuNodesChart(app, "gpu-nodes", stack.node_pools)
    charts["gpu-nodes"] = gpu_nodes
    charts["runtimes"] = RuntimesChart(app, "runtimes", stack.runtimes, gpu_nodes.pools)
    pool = gpu_nodes.pools.get(stack.samples.node_pool) if stack.samples.node_pool else None
    charts["samples"] = SamplesChart(app, "samples", stack.samples, node_pool=pool)
    charts["queues"] = QueuesChart(app, "queues", stack.queues, gpu_nodes.pools)
    charts["monitoring"] = MonitoringChart(app, "monitoring", stack.monitoring, stack.operator)
    return charts


def render_charts(stack: Stack, only: Collection[str] = CHART_ORDER) -> list[RenderedChart]:
    """Every non-empty chart of ``stack`` (of those named in ``only``), in deployment
    order, as plain dicts."""
    from kubetrain.constructs.objects import chart_manifests

    charts = build_charts(stack, only)
    rendered: list[RenderedChart] = []
    for name in CHART_ORDER:
        if name not in only:
            continue
        objects = chart_manifests(charts[name])
        if not objects:
            continue
        chart = RenderedChart(name, objects)
        for obj in objects:
            _annotate(obj, {argo.SYNC_WAVE_ANNOTATION: str(chart.wave)})
            if obj["kind"] == "CustomResourceDefinition":
                tracking = argo.tracking_id(app_name(stack, name), obj)
                _annotate(obj, {argo.TRACKING_ANNOTATION: tracking})
            if name in ("samples", "runtimes", "queues"):
                _annotate(obj, {argo.SYNC_OPTIONS_ANNOTATION: argo.SAMPLE_SYNC_OPTIONS})
        rendered.append(chart)
    return rendered


def app_name(stack: Stack, chart: str) -> str:
    """The name of the Argo CD Application that deploys ``chart`` of ``stack``."""
    return f"{stack.name}-{chart}"


def argocd_objects(stack: Stack, charts: list[RenderedChart]) -> list[dict[str, Any]]:
    """One Application per chart of this version."""
    base = f"{stack.argocd.path_prefix}/{stack.name}/{stack.version}"
    apps = [
        argo.application(
            stack.argocd,
            name=app_name(stack, chart.name),
            path=f"{base}/{chart.folder}",
            wave=chart.wave,
            destination_namespace=stack.operator.namespace if chart.name == "operator" else None,
            prune=chart.name != "crds",
        )
        for chart in charts
    ]
    return apps


def root_application(stack: Stack) -> dict[str, Any]:
    """The app-of-apps: point Argo CD at this one to deploy the version."""
    base = f"{stack.argocd.path_prefix}/{stack.name}/{stack.version}"
    return argo.application(
        stack.argocd,
        name=stack.name,
        path=f"{base}/argocd/applications",
        wave=0,
        destination_namespace=stack.argocd.namespace,
        prune=True,
    )
