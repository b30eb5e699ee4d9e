"""The ``tcp`` profile's fields: NCCL over plain TCP sockets, no RDMA. ``profile.py``
builds ``NcclProfile.tcp`` from them."""

from __future__ import annotations

from collections.abc import Mapping

from kubetrain.constructs.nccl.common import (
    DEFAULT_SHM,
    IFNAME,
    NcclDebug,
    ProfileFields,
    check_debug,
    check_names,
    check_range,
    debug_env,
    ifname_list,
)
from kubetrain.constructs.types import Quantity


def tcp(
    *,
    socket_ifnames: tuple[str, ...] = ("eth0",),
    exact_ifnames: bool = False,
    nsocks_per_thread: int | None = None,
    socket_nthreads: int | None = None,
    host_network: bool = False,
    debug: NcclDebug = NcclDebug.WARN,
    shm_size: Quantity | None = None,
    overrides: Mapping[str, str] | None = None,
) -> ProfileFields:
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
    - ``shm_size``: ``/dev/shm`` size limit. Default: :data:`DEFAULT_SHM` (16Gi).
    - ``overrides``: extra or replacing variables (the escape hatch). Default: none.
    """
    check_names("socket_ifnames", socket_ifnames, IFNAME, "interface name")
    check_range("nsocks_per_thread", nsocks_per_thread, 1, 64)
    check_range("socket_nthreads", socket_nthreads, 1, 16)
    sockets = (nsocks_per_thread or 1) * (socket_nthreads or 1)
    if nsocks_per_thread is not None and socket_nthreads is not None and sockets > 64:
        raise ValueError(
            f"nsocks_per_thread ({nsocks_per_thread}) x socket_nthreads "
            f"({socket_nthreads}) = {sockets} must be at most 64, NCCL's limit on "
            "sockets per connection"
        )
    settings = {
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": ifname_list(socket_ifnames, exact_ifnames),
        **debug_env(check_debug(debug)),
    }
    if nsocks_per_thread is not None:
        settings["NCCL_NSOCKS_PERTHREAD"] = str(nsocks_per_thread)
    if socket_nthreads is not None:
        settings["NCCL_SOCKET_NTHREADS"] = str(socket_nthreads)
    return ProfileFields(
        name="tcp",
        settings=settings,
        overrides=dict(overrides or {}),
        shm_size=shm_size or DEFAULT_SHM,
        host_network=host_network,
        expected_network="Socket",
    )
