"""``Stack``: a named, versioned set of charts and the config they are built from.

Stacks live in ``stacks/<name>.py`` (each defines ``STACK = Stack(...)``) and are what a
platform team edits; ``kubetrain synth`` and ``python -m stacks`` render them.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kubetrain.constructs.monitoring import MonitoringProps
from kubetrain.constructs.node_pool import GpuNodePoolProps
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.queues import (
    ClusterQueueProps,
    LocalQueueProps,
    ResourceFlavorProps,
    WorkloadPriorityClassProps,
)
from kubetrain.constructs.runtimes import (
    MpiRuntime,
    MpiRuntimeProps,
    RuntimeConstruct,
    RuntimeProps,
)
from kubetrain.constructs.samples import (
    HorovodSampleProps,
    PyTorchDdpSampleProps,
    TensorFlowMwmsSampleProps,
)
from kubetrain.constructs.types import check_dns_label
from kubetrain.gitops.semver import Version


@dataclass(frozen=True, kw_only=True)
class ArgoCd:
    """Where Argo CD finds the rendered manifests."""

    repo_url: str = "https://git.example.com/platform/gitops.git"
    """Git repository holding ``dist/``. Set it to your GitOps repository."""
    target_revision: str = "main"
    """Branch, tag or commit Argo CD syncs."""
    path_prefix: str = "dist"
    """Folder of the repository that ``kubetrain synth --out`` writes."""
    namespace: str = "argocd"
    """Namespace Argo CD runs in (Applications are created there)."""
    project: str = "default"
    """Argo CD project of the Applications."""
    destination_server: str = "https://kubernetes.default.svc"
    """Cluster the Applications deploy to."""

    def __post_init__(self) -> None:
        if not self.repo_url:
            raise ValueError("argocd.repo_url (empty) must name the GitOps repository")
        if self.path_prefix.startswith("/") or ".." in self.path_prefix.split("/"):
            raise ValueError(
                f"argocd.path_prefix ({self.path_prefix!r}) must be a relative path inside "
                "the repository"
            )
        check_dns_label("argocd.namespace", self.namespace)


@dataclass(frozen=True, kw_only=True)
class Samples:
    """Which sample jobs the stack ships (the ``samples`` chart)."""

    pytorch: PyTorchDdpSampleProps | None = None
    """PyTorch DDP sample (PyTorchJob). Default: none."""
    horovod: HorovodSampleProps | None = None
    """Horovod sample (MPIJob). Default: none."""
    tensorflow: TensorFlowMwmsSampleProps | None = None
    """TensorFlow MultiWorkerMirroredStrategy sample (TFJob). Default: none."""
    node_pool: str | None = None
    """Name of one of the stack's node pools the samples run on. Default: none."""


@dataclass(frozen=True)
class StackRuntime:
    """One training runtime of the stack (the ``runtimes`` chart): its construct
    (``TorchRuntime``, ``MpiRuntime``, ...), props and, optionally, the name of the
    stack's node pool it is bound to."""

    construct: type[RuntimeConstruct]
    props: RuntimeProps
    node_pool: str | None = None

    def __post_init__(self) -> None:
        if issubclass(self.construct, MpiRuntime) != isinstance(self.props, MpiRuntimeProps):
            raise ValueError(
                f"runtime {self.props.name!r}: MpiRuntime takes MpiRuntimeProps and the "
                f"other runtimes RuntimeProps (got {self.construct.__name__} with "
                f"{type(self.props).__name__})"
            )


@dataclass(frozen=True)
class StackFlavor:
    """A Kueue ResourceFlavor of the stack standing for one of its node pools (by name);
    ``props`` default to a flavor named like the pool."""

    node_pool: str
    props: ResourceFlavorProps | None = None

    @property
    def name(self) -> str:
        return self.props.flavor_name if self.props is not None else self.node_pool


@dataclass(frozen=True, kw_only=True)
class Queues:
    """Kueue quota of the stack (the ``queues`` chart). Queues name flavors and cluster
    queues by name; the chart resolves them."""

    flavors: tuple[StackFlavor, ...] = ()
    """ResourceFlavors, each from a node pool of the stack. Default: none."""
    cluster_queues: tuple[ClusterQueueProps, ...] = ()
    """ClusterQueues; their ``FlavorQuota.flavor`` names one of ``flavors``."""
    local_queues: tuple[LocalQueueProps, ...] = ()
    """LocalQueues; their ``cluster_queue`` names one of ``cluster_queues``."""
    priority_classes: tuple[WorkloadPriorityClassProps, ...] = ()
    """WorkloadPriorityClasses. Default: none."""

    def check(self, pool_names: list[str]) -> None:
        """Raise unless every name a queue refers to is defined, once."""
        flavors = [f.name for f in self.flavors]
        queues = [q.name for q in self.cluster_queues]
        locals_ = [f"{q.namespace}/{q.name}" for q in self.local_queues]
        classes = [p.name for p in self.priority_classes]
        for what, names in (
            ("queues.flavors", flavors),
            ("queues.cluster_queues", queues),
            ("queues.local_queues", locals_),
            ("queues.priority_classes", classes),
        ):
            for name in names:
                if names.count(name) > 1:
                    raise ValueError(f"{what} define {name!r} twice")
        for flavor in self.flavors:
            if flavor.node_pool not in pool_names:
                raise ValueError(
                    f"queues.flavors: node_pool ({flavor.node_pool!r}) is not one of the "
                    f"stack's node pools: {', '.join(pool_names) or 'none defined'}"
                )
        for queue in self.cluster_queues:
            for quota in queue.quotas:
                if quota.flavor_name not in flavors:
                    raise ValueError(
                        f"cluster queue {queue.name!r}: flavor {quota.flavor_name!r} is not "
                        f"one of queues.flavors: {', '.join(flavors) or 'none defined'}"
                    )
        for local in self.local_queues:
            if local.cluster_queue_name not in queues:
                raise ValueError(
                    f"local queue {local.namespace}/{local.name}: cluster_queue "
                    f"({local.cluster_queue_name!r}) is not one of queues.cluster_queues: "
                    f"{', '.join(queues) or 'none defined'}"
                )


@dataclass(frozen=True, kw_only=True)
class Stack:
    """One environment: its version, the operator, GPU node pools and samples."""

    name: str
    """Stack name; output goes to ``dist/<name>/<version>/``."""
    version: str
    """The stack's semver. Content changes need a new version (``kubetrain synth --bump``)."""
    operator: TrainingOperatorProps
    """The operator's Deployment and RBAC."""
    node_pools: tuple[GpuNodePoolProps, ...] = ()
    """``GpuNodePoolProps`` of the stack's GPU pools (the ``gpu-nodes`` chart)."""
    runtimes: tuple[StackRuntime, ...] = ()
    """Training runtimes for TrainJobs and the Kubeflow SDK (the ``runtimes`` chart)."""
    samples: Samples = field(default_factory=Samples)
    """Sample jobs (the ``samples`` chart)."""
    queues: Queues = field(default_factory=Queues)
    """Kueue flavors, queues and priorities (the ``queues`` chart). Default: none."""
    monitoring: MonitoringProps | None = None
    """The operator's ServiceMonitor, alert rules and Grafana dashboard (the
    ``monitoring`` chart; needs the Prometheus Operator's CRDs), and the same rules and
    dashboard as plain files under ``files/``. Default: none."""
    argocd: ArgoCd = field(default_factory=ArgoCd)
    """Argo CD Applications for the rendered charts."""
    description: str = ""
    """One line on what the environment is."""

    def __post_init__(self) -> None:
        check_dns_label("name", self.name)
        Version.parse(self.version)
        pool_names = [p.name for p in self.node_pools]
        if len(set(pool_names)) != len(pool_names):
            raise ValueError(f"node_pools ({', '.join(map(str, pool_names))}) repeat a name")
        runtime_names = [r.props.name for r in self.runtimes]
        if any(n is None for n in runtime_names) or len(set(runtime_names)) != len(runtime_names):
            raise ValueError(
                f"runtimes ({', '.join(map(str, runtime_names))}) must each have a name, used once"
            )
        for runtime in self.runtimes:
            if runtime.node_pool is not None and runtime.node_pool not in pool_names:
                raise ValueError(
                    f"runtime {runtime.props.name!r}: node_pool ({runtime.node_pool!r}) is not "
                    f"one of the stack's node pools: {', '.join(map(str, pool_names)) or 'none'}"
                )
        self.queues.check([str(n) for n in pool_names])
        if self.samples.node_pool is not None and self.samples.node_pool not in pool_names:
            raise ValueError(
                f"samples.node_pool ({self.samples.node_pool!r}) is not one of the stack's "
                f"node pools: {', '.join(map(str, pool_names)) or 'none defined'}"
            )


def load_stacks(package: str = "stacks", root: Path | None = None) -> dict[str, Stack]:
    """Import every module of the stacks package and collect its ``STACK``, by name."""
    root = root or Path.cwd()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        pkg = importlib.import_module(package)
    except ModuleNotFoundError:
        raise ValueError(
            f"no '{package}' package under {root}: run kubetrain from the repository root "
            "(where stacks/ lives)"
        ) from None
    stacks: dict[str, Stack] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{package}.{info.name}")
        except ValueError as exc:
            raise ValueError(f"{package}/{info.name}.py: {exc}") from exc
        stack = getattr(module, "STACK", None)
        if not isinstance(stack, Stack):
            raise ValueError(f"{package}/{info.name}.py must define STACK = Stack(...)")
        if stack.name in stacks:
            raise ValueError(f"stack name {stack.name!r} is defined twice ({info.name}.py)")
        stacks[stack.name] = stack
    return stacks
