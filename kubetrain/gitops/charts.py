"""The cdk8s charts of a stack: each chart is one deployable unit (one folder of
manifests, one Argo CD Application, one sync wave): ``crds``, ``operator``, ``gpu-nodes``
and ``samples``. They only place the constructs; :mod:`kubetrain.gitops.render` renders
them in deployment order. (And ``runtimes``, ``queues`` and ``monitoring``.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import cdk8s
import constructs

from kubetrain.api.kinds import TRAINJOB
from kubetrain.constructs.crds import KubeflowCrds, KubeflowCrdsProps
from kubetrain.constructs.job_common import NodePoolLike
from kubetrain.constructs.monitoring import MonitoringProps, OperatorMonitoring
from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps
from kubetrain.constructs.objects import construct_errors
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.queues import (
    ClusterQueue,
    LocalQueue,
    ResourceFlavor,
    ResourceFlavorProps,
    WorkloadPriorityClass,
    resolve_flavors,
)
from kubetrain.constructs.samples import HorovodSample, PyTorchDdpSample, TensorFlowMwmsSample
from kubetrain.constructs.trainer_access import TrainerUserAccess
from kubetrain.gitops.stack import Queues, Samples, StackRuntime


class CrdsChart(cdk8s.Chart):
    """The job CRDs."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: KubeflowCrdsProps | None = None
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        KubeflowCrds(self, "Crds", props)


class OperatorChart(cdk8s.Chart):
    """The TrainingOperator and its RBAC; with TrainJobs, the Kubeflow SDK users' roles
    and the public ConfigMap the SDK reads."""

    def __init__(self, scope: constructs.Construct, id: str, props: TrainingOperatorProps) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        with construct_errors(self, "Operator"):
            self.operator = TrainingOperator(self, "Operator", props)
        if TRAINJOB.kind in self.operator.config.kinds:
            TrainerUserAccess(self, "TrainerUserAccess")


class GpuNodesChart(cdk8s.Chart):
    """One :class:`GpuNodePool` per props (construct id = pool name); ``pools`` maps the
    names to the constructs so the samples chart can bind jobs to one."""

    def __init__(
        self, scope: constructs.Construct, id: str, pools: Sequence[GpuNodePoolProps]
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        self.pools: dict[str, GpuNodePool] = {}
        for index, props in enumerate(pools):
            if props.name in self.pools:
                raise ValueError(f"node_pools[{index}].name ({props.name!r}) is used twice")
            with construct_errors(self, props.name):
                self.pools[props.name] = GpuNodePool(self, props.name, props)


class RuntimesChart(cdk8s.Chart):
    """The stack's training runtimes, each bound to its node pool when it names one."""

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        runtimes: Sequence[StackRuntime],
        pools: dict[str, GpuNodePool],
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        for entry in runtimes:
            props = entry.props
            if entry.node_pool is not None:
                props = dataclasses.replace(props, node_pool=pools[entry.node_pool])
            name = str(props.name)
            with construct_errors(self, name):
                entry.construct(self, name, props)


class QueuesChart(cdk8s.Chart):
    """The stack's Kueue objects: priority classes, a ResourceFlavor per node pool it
    names, ClusterQueues and LocalQueues (names resolved to the constructs)."""

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        queues: Queues,
        pools: dict[str, GpuNodePool],
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        for priority in queues.priority_classes:
            with construct_errors(self, f"priority-{priority.name}"):
                WorkloadPriorityClass(self, f"priority-{priority.name}", priority)
        flavors: dict[str, ResourceFlavor] = {}
        for entry in queues.flavors:
            props = entry.props or ResourceFlavorProps(name=entry.node_pool)
            props = dataclasses.replace(props, pool=pools[entry.node_pool])
            with construct_errors(self, f"flavor-{entry.name}"):
                flavors[entry.name] = ResourceFlavor(self, f"flavor-{entry.name}", props)
        cluster_queues: dict[str, ClusterQueue] = {}
        for queue in queues.cluster_queues:
            with construct_errors(self, f"queue-{queue.name}"):
                cluster_queues[queue.name] = ClusterQueue(
                    self, f"queue-{queue.name}", resolve_flavors(queue, flavors)
                )
        for local in queues.local_queues:
            local_id = f"local-{local.namespace}-{local.name}"
            with construct_errors(self, local_id):
                resolved = dataclasses.replace(
                    local, cluster_queue=cluster_queues[local.cluster_queue_name]
                )
                LocalQueue(self, local_id, resolved)


class SamplesChart(cdk8s.Chart):
    """Sample training jobs, optionally bound to a GPU node pool."""

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        samples: Samples,
        *,
        node_pool: NodePoolLike | None = None,
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        builders: list[tuple[str, Any, Any]] = [
            ("pytorch-ddp", PyTorchDdpSample, samples.pytorch),
            ("horovod", HorovodSample, samples.horovod),
            ("tensorflow-mwms", TensorFlowMwmsSample, samples.tensorflow),
        ]
        for sample_id, construct, props in builders:
            if props is None:
                continue
            if node_pool is not None:
                props = dataclasses.replace(props, node_pool=node_pool)
            with construct_errors(self, sample_id):
                construct(self, sample_id, props)


class MonitoringChart(cdk8s.Chart):
    """The operator's ServiceMonitor, PrometheusRule and Grafana dashboard (empty when
    the stack has no monitoring)."""

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        props: MonitoringProps | None,
        operator: TrainingOperatorProps,
    ) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        if props is not None:
            with construct_errors(self, "Monitoring"):
                OperatorMonitoring(self, "Monitoring", props, operator)
