"""The GKE A3 profiles' fields: ``gcp_tcpx`` (A3 High, GPUDirect-TCPX) and ``gcp_tcpxo``
(A3 Mega, GPUDirect-TCPXO), with the settings Google's guides give: the NCCL network
plugin from the host, the receive-datapath daemon as a native sidecar, host network or
GKE multi-networking. ``profile.py`` builds ``NcclProfile.gcp_tcpx`` and
``NcclProfile.gcp_tcpxo`` from them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubetrain.constructs.nccl.common import (
    A3_GPUS,
    DEFAULT_SHM,
    GKE_ACCELERATOR_LABEL,
    GKE_NVIDIA_LIB_HOST_PATH,
    GKE_NVIDIA_LIB_PATH,
    NETWORK_NAME,
    TCPX_DAEMON_IMAGE,
    TCPX_SOCKET_DIR,
    TCPXO_APERTURE_DIR,
    TCPXO_DAEMON_IMAGE,
    NcclDebug,
    ProfileFields,
    check_debug,
    check_names,
    debug_env,
)
from kubetrain.constructs.types import Image, Quantity


def gcp_tcpx(
    *,
    networks: tuple[str, ...] | None = None,
    daemon_image: Image = TCPX_DAEMON_IMAGE,
    accelerator: str = "nvidia-h100-80gb",
    debug: NcclDebug = NcclDebug.WARN,
    shm_size: Quantity | None = None,
    overrides: Mapping[str, str] | None = None,
) -> ProfileFields:
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
        **debug_env(check_debug(debug)),
    }
    host_network = check_networks(networks, len(nics))
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
    daemon_access(daemon, volumes, host_network, ("NET_ADMIN",))
    return ProfileFields(
        name="gcp-tcpx",
        settings=settings,
        overrides=dict(overrides or {}),
        shm_size=shm_size or DEFAULT_SHM,
        capabilities=("IPC_LOCK",),
        host_network=host_network,
        node_selector={GKE_ACCELERATOR_LABEL: check_accelerator(accelerator)},
        annotations=gke_annotations("tcpx-daemon", networks, ()),
        volumes=tuple(volumes),
        volume_mounts=(
            {"name": "nvidia-libraries", "mountPath": GKE_NVIDIA_LIB_PATH, "readOnly": True},
            {"name": "tcpx-socket", "mountPath": TCPX_SOCKET_DIR},
        ),
        sidecars=(daemon,),
        required_gpus=A3_GPUS,
    )


def gcp_tcpxo(
    *,
    networks: tuple[str, ...] | None = None,
    daemon_image: Image = TCPXO_DAEMON_IMAGE,
    accelerator: str = "nvidia-h100-mega-80gb",
    debug: NcclDebug = NcclDebug.WARN,
    shm_size: Quantity | None = None,
    overrides: Mapping[str, str] | None = None,
) -> ProfileFields:
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
        **debug_env(check_debug(debug)),
    }
    host_network = check_networks(networks, len(nics))
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
    daemon_access(daemon, volumes, host_network, ("NET_ADMIN", "NET_BIND_SERVICE"))
    return ProfileFields(
        name="gcp-tcpxo",
        settings=settings,
        overrides=dict(overrides or {}),
        shm_size=shm_size or DEFAULT_SHM,
        capabilities=("IPC_LOCK",),
        host_network=host_network,
        node_selector={GKE_ACCELERATOR_LABEL: check_accelerator(accelerator)},
        annotations=gke_annotations("tcpxo-daemon", networks, ("/dev/dmabuf_import_helper",)),
        volumes=tuple(volumes),
        volume_mounts=(
            {"name": "nvidia-libraries", "mountPath": GKE_NVIDIA_LIB_PATH, "readOnly": True},
            {"name": "aperture-devices", "mountPath": TCPXO_APERTURE_DIR},
        ),
        sidecars=(daemon,),
        required_gpus=A3_GPUS,
    )


def check_networks(networks: tuple[str, ...] | None, nics: int) -> bool:
    """Validate the GKE networks for the GPU NICs; True when the host network is used."""
    if networks is None:
        return True
    check_names("networks", networks, NETWORK_NAME, "GKE network name")
    if len(networks) != nics:
        raise ValueError(
            f"networks ({tuple(networks)!r}) must name {nics} networks, one per GPU NIC "
            f"eth1-eth{nics}"
        )
    return False


def check_accelerator(accelerator: str) -> str:
    if not isinstance(accelerator, str) or not NETWORK_NAME.match(accelerator):
        raise ValueError(
            f"accelerator ({accelerator!r}) must be a GKE accelerator name such as "
            "'nvidia-h100-80gb'"
        )
    return accelerator


def daemon_access(
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


def gke_annotations(
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
