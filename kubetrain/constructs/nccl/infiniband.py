"""The ``infiniband`` and ``roce`` profiles' fields: NCCL over RDMA verbs (RoCE is
InfiniBand verbs over Ethernet: the same pod settings, a few more variables).
``profile.py`` builds ``NcclProfile.infiniband`` and ``NcclProfile.roce`` from them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from typing_extensions import Unpack

from kubetrain.constructs.nccl.common import (
    DEFAULT_SHM,
    HCA,
    IFNAME,
    NcclDebug,
    ProfileFields,
    check_debug,
    check_names,
    check_range,
    check_rdma,
    debug_env,
    ifname_list,
)
from kubetrain.constructs.types import Quantity


def infiniband(
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
) -> ProfileFields:
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
    settings = rdma_settings(
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
    check_rdma(rdma_resource)
    return ProfileFields(
        name="infiniband",
        settings=settings,
        overrides=dict(overrides or {}),
        shm_size=shm_size or DEFAULT_SHM,
        capabilities=("IPC_LOCK",),
        resources=dict([rdma_resource]) if rdma_resource else {},
        host_network=host_network,
        expected_network="IB",
    )


class InfinibandOptions(TypedDict, total=False):
    """The options :func:`roce` passes on to :func:`infiniband` (documented there, with
    their defaults)."""

    socket_ifnames: tuple[str, ...]
    exact_ifnames: bool
    hcas: tuple[str, ...] | None
    exact_hcas: bool
    rdma_resource: tuple[str, int] | None
    topo_file: str | None
    qps_per_connection: int | None
    relaxed_ordering: bool
    sharp: bool
    host_network: bool
    debug: NcclDebug
    shm_size: Quantity | None
    overrides: Mapping[str, str] | None


def roce(
    *,
    gid_index: int | None = None,
    traffic_class: int | None = None,
    service_level: int | None = None,
    ib_timeout: int | None = None,
    cross_nic: bool | None = None,
    **infiniband_options: Unpack[InfinibandOptions],
) -> ProfileFields:
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
    check_range("gid_index", gid_index, 0, 255)
    check_range("traffic_class", traffic_class, 0, 255)
    check_range("service_level", service_level, 0, 15)
    check_range("ib_timeout", ib_timeout, 1, 31)
    fields = infiniband(**infiniband_options)
    settings = dict(fields["settings"])
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
    fields["name"] = "roce"
    fields["settings"] = settings
    return fields


def rdma_settings(
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
    check_names("socket_ifnames", socket_ifnames, IFNAME, "interface name")
    settings = {
        "NCCL_SOCKET_IFNAME": ifname_list(socket_ifnames, exact_ifnames),
        **debug_env(check_debug(debug)),
    }
    if hcas is not None:
        check_names("hcas", hcas, HCA, "HCA name")
        settings["NCCL_IB_HCA"] = ifname_list(tuple(hcas), exact_hcas)
    elif exact_hcas:
        raise ValueError("exact_hcas (True) needs hcas: list the HCAs, e.g. ('mlx5_0', 'mlx5_1')")
    if topo_file is not None:
        if not isinstance(topo_file, str) or not topo_file.startswith("/") or "," in topo_file:
            raise ValueError(
                f"topo_file ({topo_file!r}) must be an absolute path inside the container, "
                "e.g. '/opt/microsoft/ndv5-topo.xml'"
            )
        settings["NCCL_TOPO_FILE"] = topo_file
    check_range("qps_per_connection", qps_per_connection, 1, 128)
    if qps_per_connection is not None:
        settings["NCCL_IB_QPS_PER_CONNECTION"] = str(qps_per_connection)
    if relaxed_ordering:
        settings["NCCL_IB_PCI_RELAXED_ORDERING"] = "1"
    if sharp:
        settings["NCCL_COLLNET_ENABLE"] = "1"
    return settings
