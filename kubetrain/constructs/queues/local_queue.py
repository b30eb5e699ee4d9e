"""``LocalQueue``: where a team's jobs are submitted, one per team namespace, pointing at
a :class:`~kubetrain.constructs.queues.cluster_queue.ClusterQueue`.

A job joins it with the label ``kueue.x-k8s.io/queue-name: <name>`` (the job and runtime
constructs' ``queue=``). A LocalQueue named ``default`` also takes every job of its
namespace that has no such label: Kueue's LocalQueueDefaulting (beta, on by default
since v0.12) labels them, TrainJobs that the Kubeflow SDK creates included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.queues.cluster_queue import ClusterQueue
from kubetrain.constructs.queues.common import API_VERSION, check_subdomain, metadata
from kubetrain.constructs.types import check_dns_label, check_labels

DEFAULT_NAME = K.KUEUE_DEFAULT_LOCAL_QUEUE


@dataclass(frozen=True, kw_only=True)
class LocalQueueProps:
    """Props of :class:`LocalQueue`."""

    namespace: str
    """The team's namespace. Required."""
    cluster_queue: ClusterQueue | str
    """The ClusterQueue whose quota it uses (the construct, or its name). Required."""
    name: str = DEFAULT_NAME
    """Queue name, what jobs put in their ``kueue.x-k8s.io/queue-name`` label. Default:
    ``default``, which Kueue also gives the namespace's jobs that have no such label."""
    create_namespace: bool = False
    """Also emit the Namespace (labelled with ``namespace_labels``). Default: no (the
    namespace is the team's and exists)."""
    namespace_labels: dict[str, str] = field(default_factory=dict)
    """Labels of the emitted Namespace (e.g. what the ClusterQueue's
    ``namespace_labels`` select). Default: none."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the objects. Default: none."""

    def __post_init__(self) -> None:
        check_dns_label("namespace", self.namespace)
        check_subdomain("name", self.name)
        if not isinstance(self.cluster_queue, ClusterQueue | str):
            raise ValueError(
                f"cluster_queue ({self.cluster_queue!r}) must be a ClusterQueue or its name"
            )
        check_subdomain("cluster_queue", self.cluster_queue_name)
        if isinstance(self.cluster_queue, ClusterQueue):
            queue = self.cluster_queue.props
            if not queue.admits(self.namespace):
                raise ValueError(
                    f"namespace ({self.namespace!r}) is not one ClusterQueue {queue.name!r} "
                    f"admits ({', '.join(queue.namespaces)}): Kueue would leave the "
                    "LocalQueue's jobs pending; add it to the ClusterQueue's namespaces"
                )
            missing = {
                k: v
                for k, v in queue.namespace_labels.items()
                if self.create_namespace and self.namespace_labels.get(k) != v
            }
            if missing:
                raise ValueError(
                    f"namespace_labels ({self.namespace_labels}) lack {missing}, which "
                    f"ClusterQueue {queue.name!r} requires of its namespaces"
                )
        if self.namespace_labels and not self.create_namespace:
            raise ValueError(
                "namespace_labels are set but create_namespace is False: they label the "
                "Namespace this construct emits"
            )
        check_labels("namespace_labels", self.namespace_labels)
        check_labels("labels", self.labels)

    @property
    def cluster_queue_name(self) -> str:
        if isinstance(self.cluster_queue, str):
            return self.cluster_queue
        return self.cluster_queue.name


class LocalQueue(constructs.Construct):
    """A Kueue LocalQueue (``kueue.x-k8s.io/v1beta2``); child ids ``Namespace`` (with
    ``create_namespace``) and ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: LocalQueueProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = props.name
        self.namespace = props.namespace
        if props.create_namespace:
            api_object(
                self,
                "Namespace",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": metadata(
                        props.namespace, {**props.labels, **props.namespace_labels}
                    ),
                },
            )
        self.manifest: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": metadata(self.name, props.labels, namespace=props.namespace),
            "spec": {"clusterQueue": props.cluster_queue_name},
        }
        api_object(self, "Resource", self.manifest)
