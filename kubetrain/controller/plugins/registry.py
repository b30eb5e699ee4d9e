"""The explicit, ordered plugin registry: one plugin per enabled job kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.api.kinds import MPI, PYTORCH, TENSORFLOW, TRAINJOB, XGBOOST
from kubetrain.controller.gang import GangConfig
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.plugins.mpi_plugin import MPIPlugin
from kubetrain.controller.plugins.pytorch_plugin import PyTorchPlugin
from kubetrain.controller.plugins.tensorflow_plugin import TensorFlowPlugin
from kubetrain.controller.plugins.trainjob_plugin import TrainJobPlugin
from kubetrain.controller.plugins.xgboost_plugin import XGBoostPlugin
from kubetrain.frameworks import ClusterAddressing

#: Kind -> plugin factory, in the order the operator registers them. Each plugin has its
#: own job type (``JobPlugin[Any]`` here): it is only handed the jobs its ``load`` returned.
FACTORIES: tuple[tuple[str, Callable[[ClusterAddressing], JobPlugin[Any]]], ...] = (
    (PYTORCH.kind, lambda a: PyTorchPlugin(a)),
    (TENSORFLOW.kind, lambda a: TensorFlowPlugin(a)),
    (MPI.kind, lambda a: MPIPlugin(a)),
    (XGBOOST.kind, lambda a: XGBoostPlugin(a)),
    (TRAINJOB.kind, lambda a: TrainJobPlugin(a)),
)


def build_registry(
    kinds: tuple[str, ...],
    addressing: ClusterAddressing | None = None,
    gang: GangConfig | None = None,
) -> Mapping[str, JobPlugin[Any]]:
    """The plugins for ``kinds``, in registry order (unknown kinds raise ValueError),
    each told the operator's gang scheduler."""
    known = [k for k, _ in FACTORIES]
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise ValueError(f"no plugin for kinds {unknown}: expected some of {known}")
    cluster = addressing or ClusterAddressing()
    plugins = {kind: factory(cluster) for kind, factory in FACTORIES if kind in kinds}
    for plugin in plugins.values():
        plugin.gang = gang
    return plugins
