"""The MPI launcher/worker contract in the pods, stated once for the MPIJob and a
TrainJob's MPI policy: every pod mounts the job's SSH key pair (a Secret) at the SSH
directory, and the launcher also mounts the job's ConfigMap (the hostfile, for an MPIJob
also ``discover_hosts.sh``) at :data:`~kubetrain.frameworks.mpi.CONFIG_MOUNT_PATH`, where
the launcher's variables (:func:`~kubetrain.frameworks.mpi.launcher_env`) point ``mpirun``.

The two kinds name their volumes and set their files' modes as their upstream does
(mpi-operator v2beta1, Trainer v2.3.0): a :class:`PodLayout` says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api.mpi import DEFAULT_SSH_AUTH_MOUNT_PATH
from kubetrain.frameworks.mpi import CONFIG_MOUNT_PATH, HOSTFILE

#: The ConfigMap's keys (and the files' names under ``/etc/mpi``).
DISCOVER_HOSTS = "discover_hosts.sh"
#: File modes (octal 0444 / 0555) of the ConfigMap's files.
MODE_READ = 0o444
MODE_EXEC = 0o555
#: The Secret's keys.
PRIVATE_KEY = "ssh-privatekey"
PUBLIC_KEY = "ssh-publickey"


@dataclass(frozen=True, kw_only=True)
class PodLayout:
    """How one kind names and mounts the contract's volumes."""

    ssh_volume: str
    config_volume: str
    config_files: Mapping[str, int]
    """The ConfigMap's files mounted in the launcher, with their modes."""
    ssh_default_mode: int | None = None
    """The key files' ``defaultMode``; None: 0600 in the default SSH directory
    (``/root/.ssh``), else 0644 (so that a non-root user can read them), as mpi-operator."""
    key_modes: tuple[int, int] | None = None
    """Modes of the private and the public key files (None: the default mode)."""


#: mpi-operator's (v2beta1) layout.
MPIJOB_LAYOUT = PodLayout(
    ssh_volume="ssh-auth",
    config_volume="mpi-job-config",
    config_files={HOSTFILE: MODE_READ, DISCOVER_HOSTS: MODE_EXEC},
)
#: Trainer v2's MPI plugin's layout.
TRAINJOB_LAYOUT = PodLayout(
    ssh_volume="mpi-ssh-auth",
    config_volume="mpi-hostfile",
    config_files={HOSTFILE: MODE_READ},
    ssh_default_mode=0o400,
    key_modes=(0o640, 0o644),
)


def ssh_volume(layout: PodLayout, secret: str, mount_path: str) -> dict[str, Any]:
    """The volume of the job's SSH Secret: the private key, the public key and the public
    key again as ``authorized_keys`` (every pod accepts every other's key)."""
    default_mode = layout.ssh_default_mode
    if default_mode is None:
        default_mode = 0o600 if mount_path == DEFAULT_SSH_AUTH_MOUNT_PATH else 0o644
    files = [(PRIVATE_KEY, "id_rsa", 0), (PUBLIC_KEY, "id_rsa.pub", 1)]
    files.append((PUBLIC_KEY, "authorized_keys", 1))
    items: list[dict[str, Any]] = []
    for key, path, which in files:
        item: dict[str, Any] = {"key": key, "path": path}
        if layout.key_modes is not None:
            item["mode"] = layout.key_modes[which]
        items.append(item)
    return {
        "name": layout.ssh_volume,
        "secret": {"secretName": secret, "defaultMode": default_mode, "items": items},
    }


def config_volume(layout: PodLayout, config_map: str) -> dict[str, Any]:
    """The volume of the job's ConfigMap (the launcher's)."""
    items = [
        {"key": name, "path": name, "mode": mode} for name, mode in layout.config_files.items()
    ]
    return {"name": layout.config_volume, "configMap": {"name": config_map, "items": items}}


def mount(
    pod_spec: dict[str, Any],
    layout: PodLayout,
    *,
    secret: str,
    ssh_path: str,
    config_map: str | None,
    containers: Iterable[dict[str, Any]],
) -> None:
    """Mount the SSH Secret at ``ssh_path`` (and, in the launcher, ``config_map`` at
    ``/etc/mpi``) into ``containers`` of ``pod_spec``; volumes and mounts the template
    gave the same names are replaced."""
    ours = (layout.ssh_volume, layout.config_volume)
    volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in ours]
    volumes.append(ssh_volume(layout, secret, ssh_path))
    mounts = [{"name": layout.ssh_volume, "mountPath": ssh_path}]
    if config_map is not None:
        volumes.append(config_volume(layout, config_map))
        mounts.append({"name": layout.config_volume, "mountPath": CONFIG_MOUNT_PATH})
    pod_spec["volumes"] = volumes
    for container in containers:
        kept = [m for m in container.get("volumeMounts") or [] if m.get("name") not in ours]
        container["volumeMounts"] = kept + mounts
