"""The operator's run-time half. Its framework plugins compute each replica's environment."""

from kubetrain.controller.plugins import (
    Addressing,
    ClusterAddressing,
    EnvVar,
    LocalAddressing,
    ReplicaRef,
)

__all__ = ["Addressing", "ClusterAddressing", "EnvVar", "LocalAddressing", "ReplicaRef"]
