"""The ``gpu-nodes`` chart: the stack's GPU node pools (tuner, priority, preflight)."""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
import constructs

from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps
from kubetrain.constructs.objects import construct_errors


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
