"""NCCL fabric profiles: what a GPU pod needs to talk NCCL over one kind of fabric. The
profile type is :class:`NcclProfile` (``profile.py``); each fabric has its own module
(``tcp``, ``infiniband`` (with ``roce``), ``efa``, ``gcp``) holding its factory and its
defaults; ``common`` holds what they share."""

from kubetrain.constructs.nccl.common import (
    DEBUGGING_KNOBS,
    DEFAULT_SHM,
    EFA_DEVICES_PER_INSTANCE,
    GENERIC_PROFILES,
    PLATFORM_PROFILES,
    PROFILE_NAMES,
    NcclDebug,
    quantity_bytes,
)
from kubetrain.constructs.nccl.profile import NcclProfile

__all__ = [
    "DEBUGGING_KNOBS",
    "DEFAULT_SHM",
    "EFA_DEVICES_PER_INSTANCE",
    "GENERIC_PROFILES",
    "PLATFORM_PROFILES",
    "PROFILE_NAMES",
    "NcclDebug",
    "NcclProfile",
    "quantity_bytes",
]
