"""Kueue quota as typed constructs: :class:`ResourceFlavor` (from a GPU node pool),
:class:`ClusterQueue`, :class:`LocalQueue` and :class:`WorkloadPriorityClass`, written as
``kueue.x-k8s.io/v1beta2``."""

from kubetrain.constructs.queues.cluster_queue import (
    BorrowWithinCohort,
    ClusterQueue,
    ClusterQueueProps,
    FlavorQuota,
    Preemption,
    QueueingStrategy,
    ReclaimWithinCohort,
    WithinClusterQueue,
    resolve_flavors,
)
from kubetrain.constructs.queues.common import API_VERSION, Quota
from kubetrain.constructs.queues.flavor import ResourceFlavor, ResourceFlavorProps
from kubetrain.constructs.queues.local_queue import LocalQueue, LocalQueueProps
from kubetrain.constructs.queues.priority import (
    WorkloadPriorityClass,
    WorkloadPriorityClassProps,
)

__all__ = [
    "API_VERSION",
    "BorrowWithinCohort",
    "ClusterQueue",
    "ClusterQueueProps",
    "FlavorQuota",
    "LocalQueue",
    "LocalQueueProps",
    "Preemption",
    "QueueingStrategy",
    "Quota",
    "ReclaimWithinCohort",
    "ResourceFlavor",
    "ResourceFlavorProps",
    "WithinClusterQueue",
    "WorkloadPriorityClass",
    "WorkloadPriorityClassProps",
    "resolve_flavors",
]
