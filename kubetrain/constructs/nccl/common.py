"""Vocabulary and checks every NCCL fabric module shares: the debugging knobs no generic
profile may set, resource and label names, the ``/dev/shm`` default (stated once, here),
property checks that raise ``ValueError`` naming the prop and the value, and the small
helpers that add a variable, a mount or a capability to a container without overwriting
what the template already says, and :class:`ProfileFields`, what every fabric module
returns."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Required, TypedDict

from kubetrain.api import keys as K
from kubetrain.api import quantity as kubernetes_quantity
from kubetrain.constructs.types import Image, Quantity

DEBUGGING_KNOBS = frozenset(
    {
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_BUFFSIZE",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_P2P_LEVEL",
        "NCCL_NET_GDR_LEVEL",
    }
)
"""Variables NCCL files under "debugging": never set by a generic profile."""

GENERIC_PROFILES = ("tcp", "infiniband", "roce", "efa")
PLATFORM_PROFILES = ("gcp-tcpx", "gcp-tcpxo")
PROFILE_NAMES = GENERIC_PROFILES + PLATFORM_PROFILES

GPU_RESOURCE = K.GPU_RESOURCE
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
ISTIO_INJECT = K.ISTIO_INJECT_ANNOTATION
HOST_NETWORK_DNS_POLICY = "ClusterFirstWithHostNet"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"

EFA_DEVICES_PER_INSTANCE: Mapping[str, int] = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
}
"""EFA interfaces per instance type, used when ``efa_devices`` is not given."""

# GKE A3 machines: the NCCL plugin is installed on the host by Google's installer
# DaemonSet and mounted into the pod; the receive-datapath daemon runs as a sidecar.
GKE_NVIDIA_LIB_HOST_PATH = "/home/kubernetes/bin/nvidia/lib64"
GKE_NVIDIA_LIB_PATH = "/usr/local/nvidia/lib64"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
TCPX_DAEMON_IMAGE = Image("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12")
TCPXO_DAEMON_IMAGE = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
)
TCPX_SOCKET_DIR = "/run/tcpx"
TCPXO_APERTURE_DIR = "/dev/aperture_devices"
A3_GPUS = 8

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Linux interface names: at most 15 bytes, no '/', ',' or whitespace. NCCL reads a
# leading '^' or '=' as exclude/exact markers, so names may not start with them.
IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}$")
HCA = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[0-9]+)?$")
RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
NETWORK_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DOCKER_SHM = 64 * 2**20


DEFAULT_SHM = Quantity.gibibytes(16)
"""``sizeLimit`` of the memory-backed ``/dev/shm`` every profile mounts unless told
otherwise: a cap (pages count against the pod's memory only when used)."""


class NcclDebug(StrEnum):
    """``NCCL_DEBUG`` levels a profile may set."""

    WARN = "WARN"
    """Production: only warnings and errors."""
    INFO = "INFO"
    """Bring-up: also which network, devices and GPUDirect paths NCCL picked
    (with ``NCCL_DEBUG_SUBSYS=INIT,NET``)."""


class ProfileFields(TypedDict, total=False):
    """What a fabric module derives from its options: the fields of an
    :class:`~kubetrain.constructs.nccl.profile.NcclProfile` (documented there), which
    ``profile.py`` builds the profile from. A field left out takes the profile's default."""

    name: Required[str]
    settings: Required[Mapping[str, str]]
    overrides: Mapping[str, str]
    shm_size: Quantity
    capabilities: tuple[str, ...]
    resources: Mapping[str, int | str]
    host_network: bool
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    annotations: Mapping[str, str]
    volumes: tuple[Mapping[str, Any], ...]
    volume_mounts: tuple[Mapping[str, Any], ...]
    sidecars: tuple[Mapping[str, Any], ...]
    required_gpus: int | None
    expected_network: str | None


def quantity_bytes(prop: str, quantity: Quantity) -> int:
    """The number of bytes a memory quantity stands for (``16Gi``, ``500M``, ``1e9``)."""
    size = kubernetes_quantity.amount(quantity.value)
    if size != size.to_integral_value():
        raise ValueError(
            f"{prop} ({quantity.value!r}) is not a whole number of bytes: use e.g. 512Mi or 16Gi"
        )
    return int(size)


def check_names(prop: str, names: Iterable[str], pattern: re.Pattern[str], what: str) -> None:
    if isinstance(names, str):
        raise ValueError(
            f"{prop} ({names!r}) must be a tuple of names such as ({names!r},), not a string"
        )
    values = tuple(names)
    if not values:
        raise ValueError(f"{prop} (empty) must name at least one {what}")
    for value in values:
        if not isinstance(value, str) or not pattern.match(value):
            raise ValueError(
                f"{prop} ({values!r}) holds {value!r}, which is not a valid {what}: "
                "use plain names such as 'eth0' or 'mlx5_0' (no ',', '^', '=' or spaces)"
            )
    if len(set(values)) != len(values):
        raise ValueError(f"{prop} ({values!r}) lists a {what} twice")


def check_range(prop: str, value: int | None, low: int, high: int, hint: str = "") -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{prop} ({value!r}) must be an integer from {low} to {high}{hint}")


def check_debug(debug: NcclDebug | str) -> NcclDebug:
    try:
        return NcclDebug(debug)
    except ValueError:
        raise ValueError(
            f"debug ({debug!r}) must be one of {', '.join(d.value for d in NcclDebug)}"
        ) from None


def check_shm(shm_size: Quantity) -> None:
    if not isinstance(shm_size, Quantity):
        raise ValueError(f"shm_size ({shm_size!r}) must be a Quantity, e.g. Quantity.gibibytes(16)")
    if quantity_bytes("shm_size", shm_size) <= DOCKER_SHM:
        raise ValueError(
            f"shm_size ({shm_size}) must be larger than the 64Mi container default that "
            "breaks NCCL's shared-memory transport: use e.g. Quantity.gibibytes(16)"
        )


def check_rdma(rdma_resource: tuple[str, int] | None) -> None:
    if rdma_resource is None:
        return
    if (
        not isinstance(rdma_resource, tuple)
        or len(rdma_resource) != 2
        or not isinstance(rdma_resource[0], str)
        or not RESOURCE_NAME.match(rdma_resource[0])
    ):
        raise ValueError(
            f"rdma_resource ({rdma_resource!r}) must be (extended resource name, count), "
            "e.g. ('rdma/ib', 1), or None when the pod needs no RDMA device resource"
        )
    check_range("rdma_resource count", rdma_resource[1], 1, 1024)


def debug_env(debug: NcclDebug) -> dict[str, str]:
    env = {"NCCL_DEBUG": debug.value}
    if debug is NcclDebug.INFO:
        env["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    return env


def ifname_list(names: tuple[str, ...], exact: bool) -> str:
    return ("=" if exact else "") + ",".join(names)


def add_env(container: dict[str, Any], env: Mapping[str, str]) -> None:
    existing = container.setdefault("env", [])
    present = {var.get("name") for var in existing}
    existing.extend({"name": k, "value": v} for k, v in env.items() if k not in present)
    if not existing:
        del container["env"]


def add_mount(container: dict[str, Any], mount: Mapping[str, Any]) -> None:
    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("mountPath") == mount["mountPath"] for m in mounts):
        mounts.append(dict(mount))


def add_capabilities(container: dict[str, Any], capabilities: tuple[str, ...]) -> None:
    if not capabilities:
        return
    caps = container.setdefault("securityContext", {}).setdefault("capabilities", {})
    added = caps.setdefault("add", [])
    added.extend(c for c in capabilities if c not in added)


def add_unique(spec: dict[str, Any], key: str, item: dict[str, Any]) -> None:
    items = spec.setdefault(key, [])
    if item not in items:
        items.append(item)
