"""The ``efa`` profile's fields: AWS Elastic Fabric Adapter (libfabric, aws-ofi-nccl).
``profile.py`` builds ``NcclProfile.efa`` from them."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubetrain.constructs.nccl.common import (
    DEFAULT_SHM,
    EFA_DEVICES_PER_INSTANCE,
    EFA_RESOURCE,
    HUGEPAGES_RESOURCE,
    IFNAME,
    NcclDebug,
    ProfileFields,
    check_debug,
    check_names,
    check_range,
    debug_env,
    ifname_list,
    quantity_bytes,
)
from kubetrain.constructs.types import Quantity


def efa(
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
) -> ProfileFields:
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
            f"instance_type ({instance_type!r}) must be an EC2 instance type such as 'p5.48xlarge'"
        )
    if efa_devices is None:
        if instance_type not in EFA_DEVICES_PER_INSTANCE:
            known = ", ".join(f"{k} ({v})" for k, v in EFA_DEVICES_PER_INSTANCE.items())
            raise ValueError(
                f"efa_devices (None) cannot be derived for instance_type "
                f"({instance_type!r}): pass efa_devices, or use one of {known}"
            )
        efa_devices = EFA_DEVICES_PER_INSTANCE[instance_type]
    check_range("efa_devices", efa_devices, 1, 64)
    pages = hugepages or Quantity.mebibytes(5120)
    size = quantity_bytes("hugepages", pages)
    if size <= 0 or size % (2 * 2**20):
        raise ValueError(f"hugepages ({pages}) must be a positive multiple of 2Mi, e.g. 5120Mi")
    check_names("socket_ifnames", socket_ifnames, IFNAME, "interface name")
    settings = {
        "NCCL_SOCKET_IFNAME": ifname_list(socket_ifnames, exact_ifnames),
        **debug_env(check_debug(debug)),
    }
    if legacy_ofi_plugin:
        settings["FI_PROVIDER"] = "efa"
        settings["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return ProfileFields(
        name="efa",
        settings=settings,
        overrides=dict(overrides or {}),
        shm_size=shm_size or DEFAULT_SHM,
        capabilities=("IPC_LOCK",),
        resources={EFA_RESOURCE: efa_devices, HUGEPAGES_RESOURCE: str(pages)},
        node_selector={"node.kubernetes.io/instance-type": instance_type},
        expected_network="Libfabric",
    )
