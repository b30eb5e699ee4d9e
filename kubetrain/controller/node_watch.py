"""The operator's watch on Nodes: every node, trimmed to what ``node_health`` reads (a
heartbeat changes nothing there), and each change wakes the jobs with pods on the node."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubetrain.controller.informer import Informer
from kubetrain.controller.kube import KubeApi, Resource
from kubetrain.controller.trim import trim_node

JobKey = tuple[str, str, str]
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)


class NodeWatch:
    """A node informer whose changes enqueue the jobs of the pods on the node."""

    def __init__(
        self,
        api: KubeApi,
        pod_informers: Callable[[], Iterable[Informer]],
        enqueue: Callable[[JobKey], None],
        job_of: Callable[[Mapping[str, Any]], JobKey | None],
    ) -> None:
        self._pod_informers = pod_informers
        self._enqueue = enqueue
        self._job_of = job_of
        self.informer = Informer(api, NODES, transform=trim_node, handler=self._on_node)

    def _on_node(self, _type: str, node: Mapping[str, Any]) -> None:
        """A node changed (or went): look at every job with a pod on it (not during the
        first list: every job is looked at after it anyway)."""
        if not self.informer.synced.is_set():
            return
        name = (node.get("metadata") or {}).get("name")
        for informer in self._pod_informers():
            for pod in informer.items():
                key = self._job_of(pod)
                if (pod.get("spec") or {}).get("nodeName") == name and key is not None:
                    self._enqueue(key)

    def of(self, pods: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
        """The cached Node of each pod's node (None: not in the cache, so deleted); None
        until the informer has listed once."""
        if not self.informer.synced.is_set():
            return None
        names = {str(n) for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}
        return {name: self.informer.get("", name) for name in sorted(names)}
