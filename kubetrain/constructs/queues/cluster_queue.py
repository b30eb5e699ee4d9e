"""``ClusterQueue``: the quota of one team (or one class of work) per flavor, its cohort,
borrowing and lending limits, and when Kueue may preempt for it.

Every flavor of a queue goes into one resource group, tried in the order given: Kueue
admits a workload on the first flavor where it fits. The group covers every resource any
flavor gives quota for (cpu, memory, ``nvidia.com/gpu``, then the others by name); a flavor
gets quota 0 of a covered resource it does not list, as Kueue requires each flavor to
name every covered resource. A pod that requests a resource the queue does not cover is
never admitted ("resource ... unavailable in ClusterQueue"), which is why ``nodes=`` on a
pool's flavor also covers the pool's fabric devices (RDMA, EFA, hugepages).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.queues.common import (
    API_VERSION,
    ZERO,
    Quota,
    check_subdomain,
    metadata,
)
from kubetrain.constructs.queues.flavor import ResourceFlavor
from kubetrain.constructs.types import check_dns_label, check_labels

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Kueue's CRD: at most 64 flavors and 64 covered resources in a resource group.
MAX_FLAVORS = 64
FIRST_RESOURCES = ("cpu", "memory", K.GPU_RESOURCE)


class ReclaimWithinCohort(StrEnum):
    """Whether a pending workload may preempt others' workloads in the cohort that borrow
    this queue's nominal quota (``preemption.reclaimWithinCohort``)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    """Only borrowers of lower priority."""
    ANY = "Any"
    """Any borrower, whatever its priority."""


class BorrowWithinCohort(StrEnum):
    """Whether a workload that must borrow may preempt others in the cohort
    (``preemption.borrowWithinCohort.policy``)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class WithinClusterQueue(StrEnum):
    """Whether a pending workload may preempt workloads of its own queue
    (``preemption.withinClusterQueue``)."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    """Lower priority, or equal priority and submitted later."""


class QueueingStrategy(StrEnum):
    """Order of admission (``queueingStrategy``)."""

    BEST_EFFORT_FIFO = "BestEffortFIFO"
    """By priority then age, but a workload that does not fit does not block smaller
    ones behind it."""
    STRICT_FIFO = "StrictFIFO"
    """By priority then age; the head blocks the queue until it fits."""


@dataclass(frozen=True, kw_only=True)
class Preemption:
    """When Kueue may preempt (suspend) admitted workloads for a pending one of this
    queue. Default: never (Kueue's default)."""

    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    """Take back nominal quota that other queues of the cohort borrowed."""
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort.NEVER
    """Preempt in the cohort to borrow. Needs ``reclaim_within_cohort`` other than Never."""
    borrow_max_priority: int | None = None
    """With ``borrow_within_cohort``: preempt only workloads of at most this priority
    (``maxPriorityThreshold``). Default: any lower priority."""
    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.NEVER
    """Preempt workloads of the same queue."""

    def __post_init__(self) -> None:
        for prop, enum in (
            ("reclaim_within_cohort", ReclaimWithinCohort),
            ("borrow_within_cohort", BorrowWithinCohort),
            ("within_cluster_queue", WithinClusterQueue),
        ):
            value = getattr(self, prop)
            if not isinstance(value, enum):
                choices = ", ".join(f"{enum.__name__}.{m.name}" for m in enum)
                raise ValueError(f"{prop} ({value!r}) must be one of {choices}")
        if (
            self.borrow_within_cohort is not BorrowWithinCohort.NEVER
            and self.reclaim_within_cohort is ReclaimWithinCohort.NEVER
        ):
            raise ValueError(
                f"borrow_within_cohort ({self.borrow_within_cohort.value}) needs "
                "reclaim_within_cohort other than Never: Kueue refuses a queue that preempts "
                "to borrow but not to reclaim"
            )
        if self.borrow_max_priority is not None and (
            self.borrow_within_cohort is BorrowWithinCohort.NEVER
        ):
            raise ValueError(
                f"borrow_max_priority ({self.borrow_max_priority}) needs borrow_within_cohort="
                "BorrowWithinCohort.LOWER_PRIORITY"
            )

    @property
    def uses_cohort(self) -> bool:
        return (
            self.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
            or self.borrow_within_cohort is not BorrowWithinCohort.NEVER
        )

    def to_wire(self) -> dict[str, Any]:
        borrow: dict[str, Any] = {"policy": self.borrow_within_cohort.value}
        if self.borrow_max_priority is not None:
            borrow["maxPriorityThreshold"] = self.borrow_max_priority
        return {
            "borrowWithinCohort": borrow,
            "reclaimWithinCohort": self.reclaim_within_cohort.value,
            "withinClusterQueue": self.within_cluster_queue.value,
        }


@dataclass(frozen=True, kw_only=True)
class FlavorQuota:
    """A queue's quota in one flavor. For a pool's flavor, ``nodes=4`` gives the GPUs and
    fabric devices of 4 nodes (``borrowing_nodes``/``lending_nodes`` limit them the same
    way); ``gpus``, ``cpu``, ``memory`` and ``extended`` give quotas directly."""

    flavor: ResourceFlavor | str
    """The flavor (a :class:`ResourceFlavor`, or its name when a chart resolves it)."""
    nodes: int | None = None
    """Nodes of the flavor's pool this queue owns. Default: none (give ``gpus``)."""
    borrowing_nodes: int | None = None
    """With ``nodes``: the most nodes it may borrow. Default: no limit."""
    lending_nodes: int | None = None
    """With ``nodes``: the most of its nodes it lends (at most ``nodes``). Default: all."""
    gpus: Quota | None = None
    """``nvidia.com/gpu`` quota (instead of ``nodes``). Default: none."""
    cpu: Quota | None = None
    """CPU quota. Default: none (0 when another flavor covers cpu)."""
    memory: Quota | None = None
    """Memory quota. Default: none (0 when another flavor covers memory)."""
    extended: dict[str, Quota] = field(default_factory=dict)
    """Other resources by name (``rdma/ib``, ``example.com/fpga``). Default: none."""

    def __post_init__(self) -> None:
        if not isinstance(self.flavor, ResourceFlavor | str):
            raise ValueError(f"flavor ({self.flavor!r}) must be a ResourceFlavor or its name")
        for prop in ("nodes", "borrowing_nodes", "lending_nodes"):
            value = getattr(self, prop)
            if value is not None and (isinstance(value, bool) or value < 0):
                raise ValueError(f"{prop} ({value!r}) must be a whole number >= 0")
        if self.nodes is None and (self.borrowing_nodes, self.lending_nodes) != (None, None):
            raise ValueError(
                f"flavor {self.flavor_name!r}: borrowing_nodes/lending_nodes need nodes; give "
                "limits in the Quota of gpus= instead"
            )
        if self.nodes is not None and self.gpus is not None:
            raise ValueError(
                f"flavor {self.flavor_name!r}: nodes ({self.nodes}) and gpus are both set; "
                "nodes already gives the pool's GPUs: set one of them"
            )
        if (
            self.nodes is not None
            and self.lending_nodes is not None
            and self.lending_nodes > self.nodes
        ):
            raise ValueError(
                f"lending_nodes ({self.lending_nodes}) must not exceed nodes ({self.nodes})"
            )
        for prop in ("gpus", "cpu", "memory"):
            value = getattr(self, prop)
            if value is not None and not isinstance(value, Quota):
                raise ValueError(f"{prop} ({value!r}) must be a Quota, e.g. Quota.of(8)")
        for name, value in self.extended.items():
            check_labels("extended", {name: ""})
            if name in FIRST_RESOURCES:
                raise ValueError(f"extended[{name!r}] must be set with the {name} prop")
            if not isinstance(value, Quota):
                raise ValueError(f"extended[{name!r}] ({value!r}) must be a Quota")

    @property
    def flavor_name(self) -> str:
        return self.flavor if isinstance(self.flavor, str) else self.flavor.name

    @property
    def has_limits(self) -> bool:
        quotas = [self.gpus, self.cpu, self.memory, *self.extended.values()]
        nodes_limited = self.borrowing_nodes is not None or self.lending_nodes is not None
        return nodes_limited or any(q is not None and q.has_limits for q in quotas)

    def resources(self) -> dict[str, Quota]:
        """The quota of each resource this flavor gives the queue."""
        out: dict[str, Quota] = {}
        if self.nodes is not None:
            if not isinstance(self.flavor, ResourceFlavor):
                raise ValueError(
                    f"flavor {self.flavor!r}: nodes ({self.nodes}) needs the ResourceFlavor "
                    "construct made from a GpuNodePool, not its name"
                )
            nominal = self.flavor.node_resources(self.nodes)
            borrow = self._limit(self.borrowing_nodes)
            lend = self._limit(self.lending_nodes)
            for resource, quantity in nominal.items():
                out[resource] = Quota(
                    nominal=quantity,
                    borrowing_limit=borrow.get(resource),
                    lending_limit=lend.get(resource),
                )
        for resource, quota in (
            ("cpu", self.cpu),
            ("memory", self.memory),
            (K.GPU_RESOURCE, self.gpus),
        ):
            if quota is not None:
                out[resource] = quota
        for resource, quota in self.extended.items():
            if resource in out:
                raise ValueError(
                    f"flavor {self.flavor_name!r}: extended[{resource!r}] repeats what "
                    f"nodes ({self.nodes}) already gives"
                )
            out[resource] = quota
        return out

    def _limit(self, nodes: int | None) -> dict[str, Any]:
        if nodes is None:
            return {}
        assert isinstance(self.flavor, ResourceFlavor)
        return self.flavor.node_resources(nodes)


@dataclass(frozen=True, kw_only=True)
class ClusterQueueProps:
    """Props of :class:`ClusterQueue`."""

    name: str
    """Queue name (DNS-1123 subdomain); LocalQueues point at it."""
    quotas: tuple[FlavorQuota, ...]
    """Quota per flavor, in the order Kueue tries the flavors. Required."""
    cohort: str | None = None
    """Cohort whose queues lend each other unused quota. Default: none (no borrowing)."""
    preemption: Preemption = field(default_factory=Preemption)
    """When Kueue may preempt for this queue. Default: never."""
    namespaces: tuple[str, ...] = ()
    """Namespaces whose LocalQueues may use the queue. Default: all (with
    ``namespace_labels``: those labelled so)."""
    namespace_labels: dict[str, str] = field(default_factory=dict)
    """Labels a namespace needs to use the queue. Default: none required."""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    """Admission order. Default: BestEffortFIFO (Kueue's default)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the object. Default: none."""

    def __post_init__(self) -> None:
        check_subdomain("name", self.name)
        if self.cohort is not None:
            check_subdomain("cohort", self.cohort)
        if isinstance(self.quotas, FlavorQuota) or not self.quotas:
            raise ValueError(
                f"quotas ({self.quotas!r}) must be a non-empty tuple of FlavorQuota: a queue "
                "without quota admits nothing"
            )
        if len(self.quotas) > MAX_FLAVORS:
            raise ValueError(f"quotas has {len(self.quotas)} flavors: Kueue allows {MAX_FLAVORS}")
        names = [q.flavor_name for q in self.quotas]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"quotas name flavor {name!r} twice: give each flavor once")
        if self.cohort is None:
            for quota in self.quotas:
                if quota.has_limits:
                    raise ValueError(
                        f"flavor {quota.flavor_name!r} has a borrowing or lending limit but "
                        f"queue {self.name!r} has no cohort to borrow from or lend to: set "
                        "cohort= or drop the limits"
                    )
            if self.preemption.uses_cohort:
                raise ValueError(
                    f"preemption reclaims or borrows within a cohort but queue {self.name!r} "
                    "has no cohort: set cohort= or use ReclaimWithinCohort.NEVER"
                )
        if not isinstance(self.preemption, Preemption):
            raise ValueError(f"preemption ({self.preemption!r}) must be a Preemption")
        if isinstance(self.namespaces, str):
            raise ValueError(
                f"namespaces ({self.namespaces!r}) must be a tuple such as "
                f"({self.namespaces!r},), not a string"
            )
        for namespace in self.namespaces:
            check_dns_label("namespaces", namespace)
        check_labels("namespace_labels", self.namespace_labels)
        check_labels("labels", self.labels)

    def admits(self, namespace: str) -> bool:
        """Whether a LocalQueue in ``namespace`` may point at this queue, as far as the
        names tell (labels are checked by Kueue)."""
        return not self.namespaces or namespace in self.namespaces


class ClusterQueue(constructs.Construct):
    """A Kueue ClusterQueue (``kueue.x-k8s.io/v1beta2``); child id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: ClusterQueueProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = props.name
        per_flavor = {q.flavor_name: q.resources() for q in props.quotas}
        covered = sorted(
            {r for resources in per_flavor.values() for r in resources},
            key=lambda r: (FIRST_RESOURCES.index(r) if r in FIRST_RESOURCES else 3, r),
        )
        flavors = [
            {
                "name": name,
                "resources": [resources.get(r, ZERO).to_wire(r) for r in covered],
            }
            for name, resources in per_flavor.items()
        ]
        spec: dict[str, Any] = {
            "namespaceSelector": self._namespace_selector(),
            "preemption": props.preemption.to_wire(),
            "queueingStrategy": props.queueing_strategy.value,
            "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        }
        if props.cohort is not None:
            spec["cohortName"] = props.cohort
        self.manifest: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "ClusterQueue",
            "metadata": metadata(self.name, props.labels),
            "spec": spec,
        }
        api_object(self, "Resource", self.manifest)

    @property
    def covered_resources(self) -> list[str]:
        covered: list[str] = self.manifest["spec"]["resourceGroups"][0]["coveredResources"]
        return list(covered)

    def _namespace_selector(self) -> dict[str, Any]:
        selector: dict[str, Any] = {}
        if self.props.namespace_labels:
            selector["matchLabels"] = dict(sorted(self.props.namespace_labels.items()))
        if self.props.namespaces:
            selector["matchExpressions"] = [
                {
                    "key": NAMESPACE_NAME_LABEL,
                    "operator": "In",
                    "values": sorted(self.props.namespaces),
                }
            ]
        return selector


def resolve_flavors(
    props: ClusterQueueProps, flavors: dict[str, ResourceFlavor]
) -> ClusterQueueProps:
    """``props`` with every flavor named by a string replaced by the construct of that
    name (what a chart does with a stack's queues)."""
    quotas = []
    for quota in props.quotas:
        if isinstance(quota.flavor, str):
            if quota.flavor not in flavors:
                raise ValueError(
                    f"queue {props.name!r}: flavor {quota.flavor!r} is not one of the stack's "
                    f"flavors: {', '.join(sorted(flavors)) or 'none'}"
                )
            quota = dataclasses.replace(quota, flavor=flavors[quota.flavor])
        quotas.append(quota)
    return dataclasses.replace(props, quotas=tuple(quotas))
