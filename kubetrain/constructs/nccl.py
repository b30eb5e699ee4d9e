"""NCCL fabric profiles: what a GPU pod needs to talk NCCL over one kind of fabric.

A :class:`NcclProfile` is a typed value built with a factory per fabric
(:meth:`NcclProfile.tcp`, :meth:`~NcclProfile.infiniband`, :meth:`~NcclProfile.roce`,
:meth:`~NcclProfile.efa`, :meth:`~NcclProfile.gcp_tcpx`, :meth:`~NcclProfile.gcp_tcpxo`).
It carries the environment, pod settings (``/dev/shm`` size, capabilities, RDMA/EFA
resources, hugepages, host network, platform sidecars), node selectors and tolerations,
and :meth:`NcclProfile.apply` patches a pod template with them.

Generic profiles (tcp, infiniband, roce, efa) never set the variables NCCL documents as
debugging knobs (:data:`DEBUGGING_KNOBS`); the GKE profiles set the ones Google's guides
set. ``overrides`` is the explicit escape hatch for everything else: its values win over
the profile's, and it may set the debugging knobs. Setting them in production is what
NCCL warns against ("may result in sub-optimal behavior, crashes, or hangs").
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

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

GPU_RESOURCE = "nvidia.com/gpu"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
ISTIO_INJECT = "sidecar.istio.io/inject"
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

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Linux interface names: at most 15 bytes, no '/', ',' or whitespace. NCCL reads a
# leading '^' or '=' as exclude/exact markers, so names may not start with them.
_IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}$")
_HCA = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[0-9]+)?$")
_RESOURCE_NAME = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_NETWORK_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUFFIXES = {
    "": 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY_PARTS = re.compile(r"^([0-9.]+)([A-Za-z]*)$")
_DOCKER_SHM = 64 * 2**20


class NcclDebug(StrEnum):
    """``NCCL_DEBUG`` levels a profile may set."""

    WARN = "WARN"
    """Production: only warnings and errors."""
    INFO = "INFO"
    """Bring-up: also which network, devices and GPUDirect paths NCCL picked
    (with ``NCCL_DEBUG_SUBSYS=INIT,NET``)."""


def quantity_bytes(prop: str, quantity: Quantity) -> int:
    """The number of bytes a memory quantity stands for (``16Gi``, ``500M``, ``1e9``)."""
    text = quantity.value.lstrip("+")
    exponent = re.match(r"^([0-9.]+)[eE]([+-]?[0-9]+)$", text)
    if exponent:
        amount = Decimal(exponent.group(1)) * Decimal(10) ** int(exponent.group(2))
    else:
        match = _QUANTITY_PARTS.match(text)
        if not match or match.group(2) not in _SUFFIXES:
            raise ValueError(
                f"{prop} ({quantity.value!r}) is not a memory size: use e.g. 512Mi or 16Gi"
            )
        amount = Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    return int(amount)


def _check_names(prop: str, names: Iterable[str], pattern: re.Pattern[str], what: str) -> None:
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


def _check_range(prop: str, value: int | None, low: int, high: int, hint: str = "") -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{prop} ({value!r}) must be an integer from {low} to {high}{hint}")


def _check_debug(debug: NcclDebug | str) -> NcclDebug:
    try:
        return NcclDebug(debug)
    except ValueError:
        raise ValueError(
            f"debug ({debug!r}) must be one of {', '.join(d.value for d in NcclDebug)}"
        ) from None


def _check_shm(shm_size: Quantity) -> None:
    if not isinstance(shm_size, Quantity):
        raise ValueError(f"shm_size ({shm_size!r}) must be a Quantity, e.g. Quantity.gibibytes(16)")
    if quantity_bytes("shm_size", shm_size) <= _DOCKER_SHM:
        raise ValueError(
            f"shm_size ({shm_size}) must be larger than the 64Mi container default that "
            "breaks NCCL's shared-memory transport: use e.g. Quantity.gibibytes(16)"
        )


def _check_rdma(rdma_resource: tuple[str, int] | None) -> None:
    if rdma_resource is None:
        return
    if (
        not isinstance(rdma_resource, tuple)
        or len(rdma_resource) != 2
        or not isinstance(rdma_resource[0], str)
        or not _RESOURCE_NAME.match(rdma_resource[0])
    ):
        raise ValueError(
            f"rdma_resource ({rdma_resource!r}) must be (extended resource name, count), "
            "e.g. ('rdma/ib', 1), or None when the pod needs no RDMA device resource"
        )
    _check_range("rdma_resource count", rdma_resource[1], 1, 1024)


def _debug_env(debug: NcclDebug) -> dict[str, str]:
    env = {"NCCL_DEBUG": debug.value}
    if debug is NcclDebug.INFO:
        env["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    return env


def _ifname_list(names: tuple[str, ...], exact: bool) -> str:
    return ("=" if exact else "") + ",".join(names)


@dataclass(frozen=True, kw_only=True)
class NcclProfile:
    """One NCCL fabric profile. Build it with a factory (``NcclProfile.infiniband(...)``);
    the fields are what the factory derived, and :meth:`apply` puts them on a pod."""

    name: str
    """The profile kind: tcp, infiniband, roce, efa, gcp-tcpx or gcp-tcpxo."""
    settings: Mapping[str, str]
    """Variables the profile itself sets (before ``overrides``)."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """Explicit escape hatch: variables that win over ``settings``; may set the
    debugging knobs. Default: none."""
    shm_size: Quantity = field(default_factory=lambda: Quantity.gibibytes(16))
    """``sizeLimit`` of the memory-backed ``/dev/shm``. Default: 16Gi (a cap; pages
    count against the pod's memory only when used)."""
    capabilities: tuple[str, ...] = ()
    """Capabilities added to every container. Default: none."""
    resources: Mapping[str, int | str] = field(default_factory=dict)
    """Per-pod resources added to the main container (requests = limits). Default: none."""
    host_network: bool = False
    """Run pods in the host network namespace (with ``dnsPolicy:
    ClusterFirstWithHostNet``). Default: pod network."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Node labels the fabric needs. Default: none."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """Tolerations the fabric's nodes need. Default: none."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Pod annotations the platform needs (besides ``sidecar.istio.io/inject``)."""
    volumes: tuple[Mapping[str, Any], ...] = ()
    """Pod volumes the platform needs (besides ``/dev/shm``). Default: none."""
    volume_mounts: tuple[Mapping[str, Any], ...] = ()
    """Mounts of those volumes in every main container. Default: none."""
    sidecars: tuple[Mapping[str, Any], ...] = ()
    """Native sidecars (init containers with ``restartPolicy: Always``). Default: none."""
    required_gpus: int | None = None
    """GPUs a pod must take for the fabric to work (A3 machines: all 8). Default: any."""
    expected_network: str | None = None
    """Name NCCL logs in ``Using network <name>`` when this fabric works (checked by
    the node pool's preflight). Default: not checked."""

    def __post_init__(self) -> None:
        if self.name not in PROFILE_NAMES:
            raise ValueError(
                f"name ({self.name!r}) must be one of {', '.join(PROFILE_NAMES)}: build "
                "profiles with the NcclProfile factories"
            )
        for prop, env in (("settings", self.settings), ("overrides", self.overrides)):
            for key, value in env.items():
                if not isinstance(key, str) or not _ENV_NAME.match(key):
                    raise ValueError(
                        f"{prop} key ({key!r}) is not an environment variable name: use "
                        "letters, digits and '_', not starting with a digit"
                    )
                if not isinstance(value, str) or "\x00" in value:
                    raise ValueError(f"{prop}[{key!r}] ({value!r}) must be a string")
        knobs = sorted(DEBUGGING_KNOBS & set(self.settings))
        if self.name in GENERIC_PROFILES and knobs:
            raise ValueError(
                f"settings ({', '.join(knobs)}) of the generic {self.name} profile set "
                "NCCL debugging knobs: set them through overrides, knowing NCCL warns "
                "against keeping them in production"
            )
        _check_shm(self.shm_size)
        for cap in self.capabilities:
            if not re.match(r"^[A-Z_]+$", cap):
                raise ValueError(f"capabilities ({cap!r}) must be a name such as 'IPC_LOCK'")
        for resource in self.resources:
            if not _RESOURCE_NAME.match(resource) and not resource.startswith("hugepages-"):
                raise ValueError(f"resources key ({resource!r}) is not a resource name")
        _check_range("required_gpus", self.required_gpus, 1, 64)

    # --- derived views ---------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Every variable the profile puts on a container, ``overrides`` applied, sorted."""
        merged = {**self.settings, **self.overrides}
        return dict(sorted(merged.items()))

    @property
    def debugging_knobs(self) -> tuple[str, ...]:
        """The debugging knobs this profile sets (via the platform guide or overrides)."""
        return tuple(sorted(DEBUGGING_KNOBS & set(self.env)))

    @property
    def requires_peermem(self) -> bool:
        """Whether GPUDirect RDMA on this fabric goes through ``nvidia-peermem``."""
        return self.name in ("infiniband", "roce")

    # --- factories -----------------------------------------------------------------

    @classmethod
    def tcp(
        cls,
        *,
        socket_ifnames: tuple[str, ...] = ("eth0",),
        exact_ifnames: bool = False,
        nsocks_per_thread: int | None = None,
        socket_nthreads: int | None = None,
        host_network: bool = False,
        debug: NcclDebug = NcclDebug.WARN,
        shm_size: Quantity | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> NcclProfile:
        """Plain TCP sockets (no RDMA): ``NCCL_IB_DISABLE=1``.

        - ``socket_ifnames``: interfaces NCCL may use, as an include list
          (``NCCL_SOCKET_IFNAME``). Default: ``("eth0",)``, the pod's interface.
        - ``exact_ifnames``: match names exactly (``=eth0``) instead of as prefixes.
          Default: prefixes.
        - ``nsocks_per_thread`` / ``socket_nthreads``: ``NCCL_NSOCKS_PERTHREAD`` and
          ``NCCL_SOCKET_NTHREADS``; their product must be at most 64. Default: unset
          (NCCL picks per platform).
        - ``host_network``: use the node's interfaces. Default: pod network.
        - ``debug``: ``NCCL_DEBUG``. Default: WARN.
        - ``shm_size``: ``/dev/shm`` size limit. Default: 16Gi.
        - ``overrides``: extra or replacing variables (the escape hatch). Default: none.
        """
        _check_names("socket_ifnames", socket_ifnames, _IFNAME, "interface name")
        _check_range("nsocks_per_thread", nsocks_per_thread, 1, 64)
        _check_range("socket_nthreads", socket_nthreads, 1, 16)
        sockets = (nsocks_per_thread or 1) * (socket_nthreads or 1)
        if nsocks_per_thread is not None and socket_nthreads is not None and sockets > 64:
            raise ValueError(
                f"nsocks_per_thread ({nsocks_per_thread}) x socket_nthreads "
                f"({socket_nthreads}) = {sockets} must be at most 64, NCCL's limit on "
                "sockets per connection"
            )
        settings = {
            "NCCL_IB_DISABLE": "1",
            "NCCL_SOCKET_IFNAME": _ifname_list(socket_ifnames, exact_ifnames),
            **_debug_env(_check_debug(debug)),
        }
        if nsocks_per_thread is not None:
            settings["NCCL_NSOCKS_PERTHREAD"] = str(nsocks_per_thread)
        if socket_nthreads is not None:
            settings["NCCL_SOCKET_NTHREADS"] = str(socket_nthreads)
        return cls(
            name="tcp",
            settings=settings,
            overrides=dict(overrides or {}),
            shm_size=shm_size or Quantity.gibibytes(16),
            host_network=host_network,
            expected_network="Socket",
        )

    @classmethod
    def infiniband(
        cls,
        *,
        socket_ifnames: tuple[str, ...] = ("eth0",),
        exact_ifnames: bool = False,
        hcas: tuple[str, ...] | None = None,
        exact_hcas: bool = False,
        rdma_resource: tuple[str, int] | None = ("rdma/ib", 1),
        topo_file: str | None = None,
        qps_per_connection: int | None = None,
        relaxed_ordering: bool = False,
        sharp: bool = False,
        host_network: bool = False,
        debug: NcclDebug = NcclDebug.WARN,
        shm_size: Quantity | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> NcclProfile:
        """InfiniBand (CoreWeave, Azure ND, bare metal): RDMA device resource, IPC_LOCK.

        - ``socket_ifnames``: interfaces for NCCL's bootstrap and socket fallback
          (``NCCL_SOCKET_IFNAME``). Default: ``("eth0",)``.
        - ``exact_ifnames``: match interface names exactly. Default: prefixes.
        - ``hcas``: HCAs NCCL may use (``NCCL_IB_HCA``): prefixes such as ``("ibp",)``
          (CoreWeave) or ``("mlx5_ib",)`` (Azure), or exact names with ``exact_hcas``;
          ``name:port`` selects a port. Default: unset, NCCL uses every active HCA.
        - ``exact_hcas``: match HCA names exactly (``=mlx5_0,mlx5_1``). Default: prefixes.
        - ``rdma_resource``: (resource, count) the main container requests, e.g.
          ``("rdma/ib", 8)`` on Azure. Default: ``("rdma/ib", 1)``; None for none.
        - ``topo_file``: ``NCCL_TOPO_FILE``, a path inside the container (Azure NDv5
          ships a virtual topology). Default: unset.
        - ``qps_per_connection``: ``NCCL_IB_QPS_PER_CONNECTION`` (Azure NDv5: 4).
          Default: unset (NCCL's 1).
        - ``relaxed_ordering``: ``NCCL_IB_PCI_RELAXED_ORDERING=1``. Default: unset.
        - ``sharp``: in-network reductions through the SHARP plugin
          (``NCCL_COLLNET_ENABLE=1``). Default: off.
        - ``host_network``, ``debug``, ``shm_size``, ``overrides``: as for :meth:`tcp`.
        """
        settings = _rdma_settings(
            socket_ifnames=socket_ifnames,
            exact_ifnames=exact_ifnames,
            hcas=hcas,
            exact_hcas=exact_hcas,
            topo_file=topo_file,
            qps_per_connection=qps_per_connection,
            relaxed_ordering=relaxed_ordering,
            sharp=sharp,
            debug=debug,
        )
        _check_rdma(rdma_resource)
        return cls(
            name="infiniband",
            settings=settings,
            overrides=dict(overrides or {}),
            shm_size=shm_size or Quantity.gibibytes(16),
            capabilities=("IPC_LOCK",),
            resources=dict([rdma_resource]) if rdma_resource else {},
            host_network=host_network,
            expected_network="IB",
        )

    @classmethod
    def roce(
        cls,
        *,
        socket_ifnames: tuple[str, ...] = ("eth0",),
        exact_ifnames: bool = False,
        hcas: tuple[str, ...] | None = None,
        exact_hcas: bool = False,
        gid_index: int | None = None,
        traffic_class: int | None = None,
        service_level: int | None = None,
        ib_timeout: int | None = None,
        cross_nic: bool | None = None,
        rdma_resource: tuple[str, int] | None = ("rdma/ib", 1),
        topo_file: str | None = None,
        qps_per_connection: int | None = None,
        relaxed_ordering: bool = False,
        sharp: bool = False,
        host_network: bool = False,
        debug: NcclDebug = NcclDebug.WARN,
        shm_size: Quantity | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> NcclProfile:
        """RoCE (OCI, GKE RDMA, Ethernet bare metal): as :meth:`infiniband`, plus:

        - ``gid_index``: ``NCCL_IB_GID_INDEX`` (0-255; OCI and GKE use 3). Default:
          unset, NCCL >= 2.21 picks the GID itself (a hard-coded index can differ
          between pods).
        - ``traffic_class``: ``NCCL_IB_TC`` (0-255; OCI 41, GKE 52). Default: unset.
        - ``service_level``: ``NCCL_IB_SL`` (0-15). Default: unset.
        - ``ib_timeout``: ``NCCL_IB_TIMEOUT`` (1-31; OCI 22). Default: unset.
        - ``cross_nic``: ``NCCL_CROSS_NIC``; False (0) on rail-optimized fabrics.
          Default: unset (NCCL decides).
        """
        _check_range("gid_index", gid_index, 0, 255)
        _check_range("traffic_class", traffic_class, 0, 255)
        _check_range("service_level", service_level, 0, 15)
        _check_range("ib_timeout", ib_timeout, 1, 31)
        base = cls.infiniband(
            socket_ifnames=socket_ifnames,
            exact_ifnames=exact_ifnames,
            hcas=hcas,
            exact_hcas=exact_hcas,
            rdma_resource=rdma_resource,
            topo_file=topo_file,
            qps_per_connection=qps_per_connection,
            relaxed_ordering=relaxed_ordering,
            sharp=sharp,
            host_network=host_network,
            debug=debug,
            shm_size=shm_size,
            overrides=overrides,
        )
        settings = dict(base.settings)
        if gid_index is not None:
            settings["NCCL_IB_GID_INDEX"] = str(gid_index)
        if traffic_class is not None:
            settings["NCCL_IB_TC"] = str(traffic_class)
        if service_level is not None:
            settings["NCCL_IB_SL"] = str(service_level)
        if ib_timeout is not None:
            settings["NCCL_IB_TIMEOUT"] = str(ib_timeout)
        if cross_nic is not None:
            settings["NCCL_CROSS_NIC"] = "1" if cross_nic else "0"
        # RoCE is InfiniBand verbs over Ethernet: the same pod settings, more variables.
        return dataclasses.replace(base, name="roce", settings=settings)

    @classmethod
    def efa(
        cls,
        *,
        instance_type: str = "p5.48xlarge",
        efa_devices: int | None = None,
        hugepages: Quantity | None = None,
        socket_ifnames: tuple[str, ...] = ("eth0",),
        exact_ifnames: bool = False,
        legacy_ofi_plugin: bool = False,
        debug: NcclDebug = NcclDebug.WARN,
        shm_size: Quantity | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> NcclProfile:
        """AWS Elastic Fabric Adapter through the aws-ofi-nccl plugin.

        - ``instance_type``: node selector ``node.kubernetes.io/instance-type``.
          Default: p5.48xlarge.
        - ``efa_devices``: ``vpc.amazonaws.com/efa`` per pod. Default: every EFA of the
          instance type (p5.48xlarge: 32, p5en.48xlarge: 16, p4d.24xlarge: 4).
        - ``hugepages``: ``hugepages-2Mi`` per pod (libfabric's bounce buffers), a
          multiple of 2Mi. Default: 5120Mi. The main container must also request or
          limit cpu or memory (a Kubernetes rule for hugepages).
        - ``socket_ifnames`` / ``exact_ifnames``: bootstrap interfaces. Default: eth0.
        - ``legacy_ofi_plugin``: aws-ofi-nccl <= 1.5 / libfabric < 1.18 need
          ``FI_PROVIDER=efa`` and ``FI_EFA_USE_DEVICE_RDMA=1``; newer ones select EFA
          and device RDMA themselves. Default: False (no ``FI_*`` variables).
        - ``debug``, ``shm_size``, ``overrides``: as for :meth:`tcp`.
        """
        if not isinstance(instance_type, str) or not re.match(
            r"^[a-z0-9-]+\.[a-z0-9-]+$", instance_type
        ):
            raise ValueError(
                f"instance_type ({instance_type!r}) must be an EC2 instance type such as "
                "'p5.48xlarge'"
            )
        if efa_devices is None:
            if instance_type not in EFA_DEVICES_PER_INSTANCE:
                known = ", ".join(f"{k} ({v})" for k, v in EFA_DEVICES_PER_INSTANCE.items())
                raise ValueError(
                    f"efa_devices (None) cannot be derived for instance_type "
                    f"({instance_type!r}): pass efa_devices, or use one of {known}"
                )
            efa_devices = EFA_DEVICES_PER_INSTANCE[instance_type]
        _check_range("efa_devices", efa_devices, 1, 64)
        pages = hugepages or Quantity.mebibytes(5120)
        size = quantity_bytes("hugepages", pages)
        if size <= 0 or size % (2 * 2**20):
            raise ValueError(f"hugepages ({pages}) must be a positive multiple of 2Mi, e.g. 5120Mi")
        _check_names("socket_ifnames", socket_ifnames, _IFNAME, "interface name")
        settings = {
            "NCCL_SOCKET_IFNAME": _ifname_list(socket_ifnames, exact_ifnames),
            **_debug_env(_check_debug(debug)),
        }
        if legacy_ofi_plugin:
            settings["FI_PROVIDER"] = "efa"
            settings["FI_EFA_USE_DEVICE_RDMA"] = "1"
        return cls(
            name="efa",
            settings=settings,
            overrides=dict(overrides or {}),
            shm_size=shm_size or Quantity.gibibytes(16),
            capabilities=("IPC_LOCK",),
            resources={EFA_RESOURCE: efa_devices, HUGEPAGES_RESOURCE: str(pages)},
            node_selector={"node.kubernetes.io/instance-type": instance_type},
            expected_network="Libfabric",
        )

    @classmethod
    def gcp_tcpx(
        cls,
        *,
        networks: tuple[str, ...] | None = None,
        daemon_image: Image = TCPX_DAEMON_IMAGE,
        accelerator: str = "nvidia-h100-80gb",
        debug: NcclDebug = NcclDebug.WARN,
        shm_size: Quantity | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> NcclProfile:
        """GKE GPUDirect-TCPX on A3 High (8 H100, 4 GPU NICs eth1-eth4).

        Sets the plugin's ``NCCL_GPUDIRECTTCPX_*`` variables and the NCCL settings
        Google's guide gives (among them ``NCCL_ALGO=Ring``, ``NCCL_PROTO=Simple``,
        ``NCCL_MIN/MAX_NCHANNELS=8``, ``NCCL_NET_GDR_LEVEL=PIX``), mounts the plugin the
        installer DaemonSet put on the host, and runs the receive-datapath daemon as a
        native sidecar. Pods take all 8 GPUs.

        - ``networks``: the GKE networks for eth1-eth4 (multi-networking annotations);
          the daemon then runs unprivileged with device injection. Default: None, the
          pod uses the host network and the daemon runs privileged.
        - ``daemon_image``: the tcpgpudmarxd image. Default: the guide's v2.0.12.
        - ``accelerator``: ``cloud.google.com/gke-accelerator`` node selector.
          Default: nvidia-h100-80gb.
        - ``debug``, ``shm_size``, ``overrides``: as for :meth:`tcp`.
        """
        nics = tuple(f"eth{i}" for i in range(1, 5))
        settings = {
            "LD_LIBRARY_PATH": GKE_NVIDIA_LIB_PATH,
            "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_CROSS_NIC": "0",
            "NCCL_ALGO": "Ring",
            "NCCL_PROTO": "Simple",
            "NCCL_NSOCKS_PERTHREAD": "4",
            "NCCL_SOCKET_NTHREADS": "1",
            "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
            "NCCL_P2P_NET_CHUNKSIZE": "524288",
            "NCCL_P2P_PCI_CHUNKSIZE": "524288",
            "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
            "NCCL_MAX_NCHANNELS": "8",
            "NCCL_MIN_NCHANNELS": "8",
            "NCCL_NET_GDR_LEVEL": "PIX",
            "NCCL_P2P_PXN_LEVEL": "0",
            "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": ",".join(nics),
            "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
            "NCCL_GPUDIRECTTCPX_TX_BINDINGS": (
                "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
            ),
            "NCCL_GPUDIRECTTCPX_RX_BINDINGS": (
                "eth1:22-35,124-139;eth2:22-35,124-139;eth3:74-87,178-191;eth4:74-87,178-191"
            ),
            "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "1000000",
            "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0",
            "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP": "1000",
            "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": TCPX_SOCKET_DIR,
            **_debug_env(_check_debug(debug)),
        }
        host_network = _check_networks(networks, len(nics))
        daemon: dict[str, Any] = {
            "name": "tcpx-daemon",
            "image": str(daemon_image),
            "restartPolicy": "Always",
            "command": [
                "/tcpgpudmarxd/build/app/tcpgpudmarxd",
                "--gpu_nic_preset",
                "a3vm",
                "--gpu_shmem_type",
                "fd",
                "--uds_path",
                TCPX_SOCKET_DIR,
                "--setup_param",
                "--verbose 128 2 0",
            ],
            "env": [{"name": "LD_LIBRARY_PATH", "value": GKE_NVIDIA_LIB_PATH}],
            "volumeMounts": [
                {"name": "nvidia-libraries", "mountPath": GKE_NVIDIA_LIB_PATH, "readOnly": True},
                {"name": "tcpx-socket", "mountPath": TCPX_SOCKET_DIR},
            ],
        }
        volumes: list[dict[str, Any]] = [
            {"name": "nvidia-libraries", "hostPath": {"path": GKE_NVIDIA_LIB_HOST_PATH}},
            {"name": "tcpx-socket", "emptyDir": {}},
        ]
        _daemon_access(daemon, volumes, host_network, ("NET_ADMIN",))
        return cls(
            name="gcp-tcpx",
            settings=settings,
            overrides=dict(overrides or {}),
            shm_size=shm_size or Quantity.gibibytes(16),
            capabilities=("IPC_LOCK",),
            host_network=host_network,
            node_selector={GKE_ACCELERATOR_LABEL: _check_accelerator(accelerator)},
            annotations=_gke_annotations("tcpx-daemon", networks, ()),
            volumes=tuple(volumes),
            volume_mounts=(
                {"name": "nvidia-libraries", "mountPath": GKE_NVIDIA_LIB_PATH, "readOnly": True},
                {"name": "tcpx-socket", "mountPath": TCPX_SOCKET_DIR},
            ),
            sidecars=(daemon,),
            required_gpus=A3_GPUS,
        )

    @classmethod
    def gcp_tcpxo(
        cls,
        *,
        networks: tuple[str, ...] | None = None,
        daemon_image: Image = TCPXO_DAEMON_IMAGE,
        accelerator: str = "nvidia-h100-mega-80gb",
        debug: NcclDebug = NcclDebug.WARN,
        shm_size: Quantity | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> NcclProfile:
        """GKE GPUDirect-TCPXO (FasTrak) on A3 Mega (8 H100, 8 GPU NICs eth1-eth8).

        Sets the plugin's ``NCCL_FASTRAK_*`` variables and the "simple" profile of
        Google's installer (``NCCL_PROTO=Simple``, ``NCCL_NVLS_ENABLE=0``, the tuner
        plugin and its ``*_simple`` configs, ``NCCL_MIN_NCHANNELS=4``,
        ``NCCL_BUFFSIZE=8388608``, ``NCCL_NET_GDR_LEVEL=PIX``); ``NCCL_ALGO`` is left to
        the tuner plugin. Mounts the plugin and the aperture devices from the host and
        runs the receive-datapath daemon as a native sidecar. Pods take all 8 GPUs. The
        installer's ``nccl-env-profile-simple.sh`` is authoritative for its version:
        put any difference in ``overrides``.

        - ``networks``: the GKE networks for eth1-eth8. Default: None, host network
          with a privileged daemon.
        - ``daemon_image``: the tcpgpudmarxd image. Default: the guide's v1.0.21.
        - ``accelerator``: ``cloud.google.com/gke-accelerator`` node selector.
          Default: nvidia-h100-mega-80gb.
        - ``debug``, ``shm_size``, ``overrides``: as for :meth:`tcp`.
        """
        nics = tuple(f"eth{i}" for i in range(1, 9))
        settings = {
            "LD_LIBRARY_PATH": GKE_NVIDIA_LIB_PATH,
            "NCCL_FASTRAK_CTRL_DEV": "eth0",
            "NCCL_FASTRAK_IFNAME": ",".join(nics),
            "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_CROSS_NIC": "0",
            "NCCL_PROTO": "Simple",
            "NCCL_MIN_NCHANNELS": "4",
            "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
            "NCCL_TUNER_CONFIG_PATH": f"{GKE_NVIDIA_LIB_PATH}/a3plus_tuner_config_simple.textproto",
            "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": (
                f"{GKE_NVIDIA_LIB_PATH}/a3plus_guest_config_simple.textproto"
            ),
            "NCCL_P2P_NET_CHUNKSIZE": "524288",
            "NCCL_P2P_PCI_CHUNKSIZE": "524288",
            "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
            "NCCL_FASTRAK_NUM_FLOWS": "2",
            "NCCL_FASTRAK_USE_SNAP": "1",
            "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
            "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0",
            "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
            "NCCL_FASTRAK_USE_LLCM": "1",
            "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": TCPXO_APERTURE_DIR,
            "NCCL_BUFFSIZE": "8388608",
            "NCCL_NET_GDR_LEVEL": "PIX",
            "NCCL_NVLS_ENABLE": "0",
            **_debug_env(_check_debug(debug)),
        }
        host_network = _check_networks(networks, len(nics))
        daemon: dict[str, Any] = {
            "name": "tcpxo-daemon",
            "image": str(daemon_image),
            "restartPolicy": "Always",
            "command": ["/bin/sh", "-c"],
            "args": [
                "chmod 755 /fts/entrypoint_rxdm_container.sh && "
                "exec /fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8"
            ],
            "env": [{"name": "LD_LIBRARY_PATH", "value": GKE_NVIDIA_LIB_PATH}],
            "volumeMounts": [
                {"name": "nvidia-libraries", "mountPath": GKE_NVIDIA_LIB_PATH, "readOnly": True},
            ],
        }
        volumes: list[dict[str, Any]] = [
            {"name": "nvidia-libraries", "hostPath": {"path": GKE_NVIDIA_LIB_HOST_PATH}},
            {"name": "aperture-devices", "hostPath": {"path": TCPXO_APERTURE_DIR}},
        ]
        _daemon_access(daemon, volumes, host_network, ("NET_ADMIN", "NET_BIND_SERVICE"))
        return cls(
            name="gcp-tcpxo",
            settings=settings,
            overrides=dict(overrides or {}),
            shm_size=shm_size or Quantity.gibibytes(16),
            capabilities=("IPC_LOCK",),
            host_network=host_network,
            node_selector={GKE_ACCELERATOR_LABEL: _check_accelerator(accelerator)},
            annotations=_gke_annotations("tcpxo-daemon", networks, ("/dev/dmabuf_import_helper",)),
            volumes=tuple(volumes),
            volume_mounts=(
                {"name": "nvidia-libraries", "mountPath": GKE_NVIDIA_LIB_PATH, "readOnly": True},
                {"name": "aperture-devices", "mountPath": TCPXO_APERTURE_DIR},
            ),
            sidecars=(daemon,),
            required_gpus=A3_GPUS,
        )

    # --- applying ------------------------------------------------------------------

    def apply(self, template: Mapping[str, Any], *, gpus_per_node: int) -> dict[str, Any]:
        """A patched deep copy of a PodTemplateSpec dict.

        Every container gets the profile's variables (a variable the container already
        sets keeps its value). With ``gpus_per_node == 0`` (a pod without GPUs, such as
        an MPI launcher) that and the ``sidecar.istio.io/inject: "false"`` annotation
        are all. A GPU pod also gets: the fabric's node selector and tolerations, a
        memory-backed ``/dev/shm`` with ``sizeLimit`` in every container that does not
        mount one, the capabilities in every container, ``nvidia.com/gpu`` (when not
        set) and the fabric's resources on the first container (requests = limits),
        host network with ``dnsPolicy: ClusterFirstWithHostNet`` when the fabric uses
        it, and the platform's volumes, mounts, annotations and native sidecars.
        Settings the template already has are kept.
        """
        if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int):
            raise ValueError(f"gpus_per_node ({gpus_per_node!r}) must be an integer")
        if gpus_per_node < 0:
            raise ValueError(f"gpus_per_node ({gpus_per_node}) must be >= 0")
        if self.required_gpus and gpus_per_node not in (0, self.required_gpus):
            raise ValueError(
                f"gpus_per_node ({gpus_per_node}) must be {self.required_gpus} for the "
                f"{self.name} profile: the fabric's daemon and NICs serve a whole node"
            )
        out: dict[str, Any] = copy.deepcopy(dict(template))
        spec = out.setdefault("spec", {})
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise ValueError(
                "template.spec.containers (empty) must hold at least one container to "
                f"apply the {self.name} profile to"
            )
        annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
        annotations.setdefault(ISTIO_INJECT, "false")
        env = self.env
        for container in containers:
            _add_env(container, env)
        if gpus_per_node == 0:
            return out
        for key, value in self.annotations.items():
            annotations.setdefault(key, value)
        selector = spec.setdefault("nodeSelector", {})
        for key, value in self.node_selector.items():
            selector.setdefault(key, value)
        if not selector:
            del spec["nodeSelector"]
        for toleration in self.tolerations:
            _add_unique(spec, "tolerations", dict(toleration))
        self._add_shm(spec, containers)
        for container in containers:
            for mount in self.volume_mounts:
                _add_mount(container, mount)
            _add_capabilities(container, self.capabilities)
        for volume in self.volumes:
            if not any(v.get("name") == volume["name"] for v in spec.get("volumes", [])):
                spec.setdefault("volumes", []).append(copy.deepcopy(dict(volume)))
        self._add_resources(containers[0], gpus_per_node)
        if self.host_network:
            spec["hostNetwork"] = True
            if spec.get("dnsPolicy", "ClusterFirst") == "ClusterFirst":
                spec["dnsPolicy"] = HOST_NETWORK_DNS_POLICY
        names = {c.get("name") for c in containers + spec.get("initContainers", [])}
        for sidecar in self.sidecars:
            if sidecar["name"] not in names:
                spec.setdefault("initContainers", []).append(copy.deepcopy(dict(sidecar)))
        return out

    def _add_shm(self, spec: dict[str, Any], containers: list[dict[str, Any]]) -> None:
        wanting = [
            c
            for c in containers
            if not any(m.get("mountPath") == SHM_PATH for m in c.get("volumeMounts", []))
        ]
        if not wanting:
            return
        volumes = spec.setdefault("volumes", [])
        if not any(v.get("name") == SHM_VOLUME for v in volumes):
            volumes.append(
                {
                    "name": SHM_VOLUME,
                    "emptyDir": {"medium": "Memory", "sizeLimit": str(self.shm_size)},
                }
            )
        for container in wanting:
            container.setdefault("volumeMounts", []).append(
                {"name": SHM_VOLUME, "mountPath": SHM_PATH}
            )

    def _add_resources(self, container: dict[str, Any], gpus_per_node: int) -> None:
        resources = container.setdefault("resources", {})
        limits = resources.setdefault("limits", {})
        requests = resources.get("requests", {})
        wanted: dict[str, int | str] = {GPU_RESOURCE: gpus_per_node, **self.resources}
        for name, amount in wanted.items():
            if name in limits or name in requests:
                continue
            limits[name] = amount
            if name != GPU_RESOURCE:
                resources.setdefault("requests", {})[name] = amount
        has_hugepages = any(k.startswith("hugepages-") for k in {**limits, **requests})
        has_cpu_or_memory = any(
            k in ("cpu", "memory") for k in {**limits, **resources.get("requests", {})}
        )
        if has_hugepages and not has_cpu_or_memory:
            raise ValueError(
                f"container {container.get('name')!r} gets {HUGEPAGES_RESOURCE} from the "
                f"{self.name} profile but has no cpu or memory request or limit, which "
                "Kubernetes requires alongside hugepages: give it resources (e.g. a memory "
                "request)"
            )


def _rdma_settings(
    *,
    socket_ifnames: tuple[str, ...],
    exact_ifnames: bool,
    hcas: tuple[str, ...] | None,
    exact_hcas: bool,
    topo_file: str | None,
    qps_per_connection: int | None,
    relaxed_ordering: bool,
    sharp: bool,
    debug: NcclDebug,
) -> dict[str, str]:
    _check_names("socket_ifnames", socket_ifnames, _IFNAME, "interface name")
    settings = {
        "NCCL_SOCKET_IFNAME": _ifname_list(socket_ifnames, exact_ifnames),
        **_debug_env(_check_debug(debug)),
    }
    if hcas is not None:
        _check_names("hcas", hcas, _HCA, "HCA name")
        settings["NCCL_IB_HCA"] = _ifname_list(tuple(hcas), exact_hcas)
    elif exact_hcas:
        raise ValueError("exact_hcas (True) needs hcas: list the HCAs, e.g. ('mlx5_0', 'mlx5_1')")
    if topo_file is not None:
        if not isinstance(topo_file, str) or not topo_file.startswith("/") or "," in topo_file:
            raise ValueError(
                f"topo_file ({topo_file!r}) must be an absolute path inside the container, "
                "e.g. '/opt/microsoft/ndv5-topo.xml'"
            )
        settings["NCCL_TOPO_FILE"] = topo_file
    _check_range("qps_per_connection", qps_per_connection, 1, 128)
    if qps_per_connection is not None:
        settings["NCCL_IB_QPS_PER_CONNECTION"] = str(qps_per_connection)
    if relaxed_ordering:
        settings["NCCL_IB_PCI_RELAXED_ORDERING"] = "1"
    if sharp:
        settings["NCCL_COLLNET_ENABLE"] = "1"
    return settings


def _check_networks(networks: tuple[str, ...] | None, nics: int) -> bool:
    """Validate the GKE networks for the GPU NICs; True when the host network is used."""
    if networks is None:
        return True
    _check_names("networks", networks, _NETWORK_NAME, "GKE network name")
    if len(networks) != nics:
        raise ValueError(
            f"networks ({tuple(networks)!r}) must name {nics} networks, one per GPU NIC "
            f"eth1-eth{nics}"
        )
    return False


def _check_accelerator(accelerator: str) -> str:
    if not isinstance(accelerator, str) or not _NETWORK_NAME.match(accelerator):
        raise ValueError(
            f"accelerator ({accelerator!r}) must be a GKE accelerator name such as "
            "'nvidia-h100-80gb'"
        )
    return accelerator


def _daemon_access(
    daemon: dict[str, Any],
    volumes: list[dict[str, Any]],
    host_network: bool,
    capabilities: tuple[str, ...],
) -> None:
    """Host network: the daemon runs privileged. Pod network: it gets capabilities,
    the host's /sys and /proc/sys, and its GPUs by device injection."""
    if host_network:
        daemon["securityContext"] = {"privileged": True}
        return
    daemon["securityContext"] = {"capabilities": {"add": list(capabilities)}}
    daemon["volumeMounts"] += [
        {"name": "host-sys", "mountPath": "/hostsysfs"},
        {"name": "host-proc-sys", "mountPath": "/hostprocsysfs"},
    ]
    volumes += [
        {"name": "host-sys", "hostPath": {"path": "/sys"}},
        {"name": "host-proc-sys", "hostPath": {"path": "/proc/sys"}},
    ]


def _gke_annotations(
    daemon: str, networks: tuple[str, ...] | None, extra_devices: tuple[str, ...]
) -> dict[str, str]:
    if networks is None:
        return {}
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"eth{i}", "network": name} for i, name in enumerate(networks, start=1)
    ]
    devices = [f"/dev/nvidia{i}" for i in range(A3_GPUS)]
    devices += ["/dev/nvidiactl", "/dev/nvidia-uvm", *extra_devices]
    return {
        f"devices.gke.io/container.{daemon}": "".join(f"- path: {d}\n" for d in devices),
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": json.dumps(interfaces, separators=(",", ":")),
    }


def _add_env(container: dict[str, Any], env: Mapping[str, str]) -> None:
    existing = container.setdefault("env", [])
    present = {var.get("name") for var in existing}
    existing.extend({"name": k, "value": v} for k, v in env.items() if k not in present)
    if not existing:
        del container["env"]


def _add_mount(container: dict[str, Any], mount: Mapping[str, Any]) -> None:
    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("mountPath") == mount["mountPath"] for m in mounts):
        mounts.append(dict(mount))


def _add_capabilities(container: dict[str, Any], capabilities: tuple[str, ...]) -> None:
    if not capabilities:
        return
    caps = container.setdefault("securityContext", {}).setdefault("capabilities", {})
    added = caps.setdefault("add", [])
    added.extend(c for c in capabilities if c not in added)


def _add_unique(spec: dict[str, Any], key: str, item: dict[str, Any]) -> None:
    items = spec.setdefault(key, [])
    if item not in items:
        items.append(item)
