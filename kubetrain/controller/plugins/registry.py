"""The explicit, ordered plugin registry: one plugin per enabled job kind, in the kinds
table's order. A kind whose replicas are peers with their own address (PyTorchJob, TFJob,
...) gets the replicated plugin with its framework's rules: a new such kind needs no
plugin module. MPIJob and TrainJob have their own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.api.kinds import MPI, OPERATOR_KINDS, TRAINJOB
from kubetrain.api.loader import JOB_TYPES
from kubetrain.controller.gang import GangConfig
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.plugins.mpi_plugin import MPIPlugin
from kubetrain.controller.plugins.replicated import ReplicatedPlugin
from kubetrain.controller.plugins.trainjob_plugin import TrainJobPlugin
from kubetrain.frameworks import ClusterAddressing, framework_for

#: ``factory(addressing)``: a kind's plugin. Each plugin has its own job type
#: (``JobPlugin[Any]`` here): it is only handed the jobs its ``load`` returned.
Factory = Callable[[ClusterAddressing], JobPlugin[Any]]

#: The kinds with a plugin of their own.
OWN_PLUGINS: Mapping[str, Factory] = {
    MPI.kind: lambda a: MPIPlugin(a),
    TRAINJOB.kind: lambda a: TrainJobPlugin(a),
}


def plugin_for(kind: str, addressing: ClusterAddressing | None = None) -> JobPlugin[Any]:
    """The plugin of ``kind`` (ValueError naming the kinds for an unknown one)."""
    cluster = addressing or ClusterAddressing()
    own = OWN_PLUGINS.get(kind)
    if own is not None:
        return own(cluster)
    if kind not in JOB_TYPES:
        raise ValueError(
            f"no plugin for kind {kind!r}: expected one of {', '.join(OPERATOR_KINDS)}"
        )
    return ReplicatedPlugin(framework_for(kind), JOB_TYPES[kind], cluster)


def build_registry(
    kinds: tuple[str, ...],
    addressing: ClusterAddressing | None = None,
    gang: GangConfig | None = None,
) -> Mapping[str, JobPlugin[Any]]:
    """The plugins for ``kinds``, in registry order (unknown kinds raise ValueError),
    each told the operator's gang scheduler."""
    known = list(OPERATOR_KINDS)
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise ValueError(f"no plugin for kinds {unknown}: expected some of {known}")
    cluster = addressing or ClusterAddressing()
    plugins = {kind: plugin_for(kind, cluster) for kind in known if kind in kinds}
    for plugin in plugins.values():
        plugin.gang = gang
    return plugins
