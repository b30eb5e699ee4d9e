"""NCCL fabric profiles: what a GPU pod needs to talk NCCL over one kind of fabric. Each
fabric has its own module (``tcp``, ``infiniband`` (with ``roce``), ``efa``, ``gcp``) that
states its options and defaults and derives the profile's fields from them; ``profile.py``
builds :class:`NcclProfile` from those fields (one factory per fabric) and applies it to
pods; ``common`` holds what they share. Imports go one way: common <- fabrics <- profile."""

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
