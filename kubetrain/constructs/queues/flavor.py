"""``ResourceFlavor``: one kind of node Kueue hands quota out for, usually derived from a
:class:`~kubetrain.constructs.node_pool.GpuNodePool`.

Kueue uses a flavor three ways (facts of Kueue v0.15): ``nodeLabels`` are the labels of
the flavor's nodes, injected as the node selector of every pod it admits on the flavor
(and a pod whose own selector contradicts them never gets the flavor); ``nodeTaints`` are
the taints those nodes carry, which a pod must tolerate to get the flavor, counting the
flavor's own ``tolerations``; ``tolerations`` are added to every pod it admits on the
flavor. A flavor made from a pool states the pool's selector and taints, and by default
also tolerates them: the quota is the permission to use the nodes, so a job admitted on
the flavor lands on them even when it was not bound to the pool (a TrainJob of a generic
runtime, plain YAML). Kueue steers placement only: the NCCL profile, priority class and
runtime class still come from binding a job or runtime to the pool (``node_pool=``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.constructs.node_pool import GpuNodePool, Taint
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.queues.common import API_VERSION, check_subdomain, metadata, scaled
from kubetrain.constructs.types import Quantity, check_labels

#: Kueue's CRD allows at most this many node labels, taints and tolerations per flavor.
MAX_ENTRIES = 8
GPU_TAINT = {"key": K.GPU_RESOURCE, "effect": "NoSchedule"}


@dataclass(frozen=True, kw_only=True)
class ResourceFlavorProps:
    """Props of :class:`ResourceFlavor`: a GPU node pool, or node labels of its own."""

    pool: GpuNodePool | None = None
    """The GPU node pool whose nodes this flavor stands for: its node selector becomes
    ``nodeLabels``, ``nvidia.com/gpu:NoSchedule`` and its taints ``nodeTaints``, and
    ``nodes=`` quotas of a ClusterQueue count its GPUs and fabric devices. Default: none
    (the flavor is what ``node_labels`` and ``taints`` say; none of either is Kueue's
    "default flavor" of a homogeneous cluster)."""
    name: str | None = None
    """Flavor name (DNS-1123 subdomain). Default: the pool's name; required without one."""
    node_labels: dict[str, str] = field(default_factory=dict)
    """Node labels besides the pool's. Default: none."""
    taints: tuple[Taint, ...] = ()
    """Node taints besides the pool's. Default: none."""
    tolerate_taints: bool = True
    """Kueue adds tolerations of the flavor's taints (and the pool's fabric tolerations)
    to the pods it admits on the flavor. False: only pods that tolerate the taints
    themselves (jobs bound to the pool do) can get this flavor. Default: tolerate."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the object. Default: none."""

    def __post_init__(self) -> None:
        if self.pool is not None and not isinstance(self.pool, GpuNodePool):
            raise ValueError(f"pool ({self.pool!r}) must be a GpuNodePool construct")
        if self.name is None and self.pool is None:
            raise ValueError("name (None) is required for a flavor without a pool")
        check_subdomain("name", self.flavor_name)
        check_labels("node_labels", self.node_labels)
        check_labels("labels", self.labels)
        for taint in self.taints:
            if not isinstance(taint, Taint):
                raise ValueError(f"taints ({taint!r}) must hold Taint values")
        if self.pool is not None:
            pool_selector = self.pool.node_selector
            for key in sorted(set(pool_selector) & set(self.node_labels)):
                if pool_selector[key] != self.node_labels[key]:
                    raise ValueError(
                        f"node_labels[{key!r}] ({self.node_labels[key]!r}) contradicts node "
                        f"pool {self.pool.props.name!r}, whose nodes have {pool_selector[key]!r}"
                    )

    @property
    def flavor_name(self) -> str:
        if self.name is not None:
            return self.name
        assert self.pool is not None
        return self.pool.props.name


class ResourceFlavor(constructs.Construct):
    """A Kueue ResourceFlavor (``kueue.x-k8s.io/v1beta2``); child id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: ResourceFlavorProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = props.flavor_name
        spec: dict[str, Any] = {}
        if self.node_labels:
            spec["nodeLabels"] = self.node_labels
        if self.node_taints:
            spec["nodeTaints"] = self.node_taints
        if self.tolerations:
            spec["tolerations"] = self.tolerations
        for prop, value in (
            ("node labels", self.node_labels),
            ("node taints", self.node_taints),
            ("tolerations", self.tolerations),
        ):
            if len(value) > MAX_ENTRIES:
                raise ValueError(
                    f"flavor {self.name!r} has {len(value)} {prop} ({_listed(value)}): Kueue "
                    f"allows at most {MAX_ENTRIES}; select the pool's nodes with fewer labels"
                )
        self.manifest: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": metadata(self.name, props.labels),
            "spec": spec,
        }
        api_object(self, "Resource", self.manifest)

    @property
    def pool(self) -> GpuNodePool | None:
        return self.props.pool

    @property
    def node_labels(self) -> dict[str, str]:
        """The flavor's ``nodeLabels``: the pool's node selector and ``node_labels``."""
        selector = dict(self.pool.node_selector) if self.pool is not None else {}
        selector.update(self.props.node_labels)
        return dict(sorted(selector.items()))

    @property
    def node_taints(self) -> list[dict[str, str]]:
        """The flavor's ``nodeTaints``: the GPU taint and the pool's (with a pool), then
        ``taints``, each once."""
        taints = [*(self.pool.props.taints if self.pool is not None else ()), *self.props.taints]
        out: list[dict[str, str]] = [dict(GPU_TAINT)] if self.pool is not None else []
        for taint in taints:
            wire = {"key": taint.key, "effect": taint.effect}
            if taint.value is not None:
                wire["value"] = taint.value
            if not any(t["key"] == wire["key"] and t["effect"] == wire["effect"] for t in out):
                out.append(wire)
        return out

    @property
    def tolerations(self) -> list[dict[str, Any]]:
        """With ``tolerate_taints``, what binding a pod to the pool tolerates (the GPU
        taint, the pool's taints, the fabric's tolerations) and the extra ``taints``."""
        if not self.props.tolerate_taints:
            return []
        out: list[dict[str, Any]] = list(self.pool.tolerations) if self.pool is not None else []
        for taint in self.props.taints:
            if taint.toleration() not in out:
                out.append(taint.toleration())
        return out

    def node_resources(self, nodes: int) -> dict[str, Quantity]:
        """What ``nodes`` of the pool give a queue: their GPUs and, per node, the fabric
        devices its NCCL profile puts on a pod (RDMA, EFA, hugepages). Counted for one
        pod per node that takes all its GPUs, which is what jobs bound to the pool run."""
        if self.pool is None:
            raise ValueError(
                f"nodes ({nodes}) needs a flavor made from a GpuNodePool: flavor "
                f"{self.name!r} has none; give gpus= instead"
            )
        out = {K.GPU_RESOURCE: Quantity.of(self.pool.gpus_per_node * nodes)}
        for resource, per_pod in sorted(self.pool.profile.resources.items()):
            out[resource] = scaled(f"{resource} of pool {self.pool.props.name!r}", per_pod, nodes)
        return out


def _listed(entries: dict[str, str] | list[dict[str, Any]]) -> str:
    if isinstance(entries, dict):
        return ", ".join(f"{k}={v}" for k, v in entries.items())
    return ", ".join(str(e.get("key", "")) for e in entries)
