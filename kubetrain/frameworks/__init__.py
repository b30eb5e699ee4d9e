"""One home per training framework: the pure rules of each (roles, environment contract,
processes and world size, start order, success), which the operator's plugins, ``kubetrain
run --local`` and the constructs all call. Adding a framework is one module here and one
line in :data:`FRAMEWORKS` (plus its plugin in the operator)."""

from __future__ import annotations

from collections.abc import Mapping

from kubetrain.frameworks import jax, mpi, paddle, pytorch, tensorflow, xgboost
from kubetrain.frameworks.addressing import (
    Addressing,
    ClusterAddressing,
    EnvVar,
    LocalAddressing,
    ReplicaRef,
    env_var,
    replica_name,
)
from kubetrain.frameworks.base import Done, Framework, StartAfter

#: Every framework by the kind of its jobs, in registry order.
FRAMEWORKS: Mapping[str, Framework] = {
    f.info.kind: f
    for f in (
        pytorch.FRAMEWORK,
        tensorflow.FRAMEWORK,
        mpi.FRAMEWORK,
        paddle.FRAMEWORK,
        jax.FRAMEWORK,
        xgboost.FRAMEWORK,
    )
}


def framework_for(kind: str) -> Framework:
    """The framework of ``kind``'s jobs; ValueError naming the known kinds."""
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        raise ValueError(
            f"no framework for kind {kind!r}: expected one of {', '.join(FRAMEWORKS)}"
        ) from None


__all__ = [
    "FRAMEWORKS",
    "Addressing",
    "ClusterAddressing",
    "Done",
    "EnvVar",
    "Framework",
    "LocalAddressing",
    "ReplicaRef",
    "StartAfter",
    "env_var",
    "framework_for",
    "jax",
    "mpi",
    "paddle",
    "pytorch",
    "replica_name",
    "tensorflow",
    "xgboost",
]
