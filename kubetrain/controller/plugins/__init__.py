"""Framework plugins: what the operator injects into each replica, per job kind.

Each module is pure (no Kubernetes calls) so the operator and ``kubetrain run --local``
share it: the only difference between the two is the :class:`Addressing` passed in.
"""

from kubetrain.controller.plugins import mpi, pytorch, tensorflow
from kubetrain.controller.plugins.addressing import (
    Addressing,
    ClusterAddressing,
    EnvVar,
    LocalAddressing,
    ReplicaRef,
    env_var,
)

__all__ = [
    "Addressing",
    "ClusterAddressing",
    "EnvVar",
    "LocalAddressing",
    "ReplicaRef",
    "env_var",
    "mpi",
    "pytorch",
    "tensorflow",
]
