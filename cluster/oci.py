"""Tiny OCI images written from files, with no registry and no container engine.

The real node (``cluster.node``) needs two images nobody can pull here: the pod sandbox
(``registry.k8s.io/pause:3.10``, kubetrain's own ``pause`` program) and, for its tests,
a busybox image. Both are a handful of files, so they are written directly as an OCI
image-layout tar archive (one uncompressed layer), which ``ctr images import`` reads. The
archive is byte-for-byte the same for the same files: fixed times and owners, entries in
sorted order.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
#: The annotation containerd names an imported image after (the whole reference).
CONTAINERD_NAME_ANNOTATION = "io.containerd.image.name"
#: The OCI annotation for the reference's tag.
OCI_REF_ANNOTATION = "org.opencontainers.image.ref.name"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class ImageFiles:
    """What goes into an image's only layer: files (path -> (content, mode)), symbolic
    links (path -> target) and empty directories (path -> mode); paths are absolute."""

    files: Mapping[str, tuple[bytes, int]] = field(default_factory=dict)
    symlinks: Mapping[str, str] = field(default_factory=dict)
    directories: Mapping[str, int] = field(default_factory=dict)


def go_arch() -> str:
    """This machine's architecture as OCI names it (``amd64``, ``arm64``)."""
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def layer_tar(content: ImageFiles) -> bytes:
    """The layer: every parent directory, then each entry, sorted, owned by root, time 0."""
    entries: dict[str, tarfile.TarInfo] = {}

    def add_dir(path: str, mode: int = 0o755) -> None:
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            name = "/".join(parts[:depth])
            if name and name not in entries:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                info.mode = mode if depth == len(parts) else 0o755
                entries[name] = info

    payloads: dict[str, bytes] = {}
    for path, mode in content.directories.items():
        add_dir(path, mode)
    for path, (data, mode) in content.files.items():
        add_dir(path.rsplit("/", 1)[0])
        info = tarfile.TarInfo(path.strip("/"))
        info.size, info.mode = len(data), mode
        entries[info.name], payloads[info.name] = info, data
    for path, target in content.symlinks.items():
        add_dir(path.rsplit("/", 1)[0])
        info = tarfile.TarInfo(path.strip("/"))
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
        entries[info.name] = info
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries):
            info = entries[name]
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            payload = payloads.get(name)
            tar.addfile(info, io.BytesIO(payload) if payload is not None else None)
    return out.getvalue()


def write_image_archive(
    dest: Path,
    ref: str,
    content: ImageFiles,
    *,
    entrypoint: Sequence[str] = (),
    cmd: Sequence[str] = (),
) -> str:
    """Write ``content`` as the image ``ref`` in an OCI archive at ``dest``; return the
    image's config digest (its id, as ``ctr images ls`` and the CRI report it)."""
    if ":" not in ref.rsplit("/", 1)[-1]:
        raise ValueError(f"image reference {ref!r} has no tag: expected e.g. {ref}:1.0")
    layer = layer_tar(content)
    layer_digest = _digest(layer)
    image_config: dict[str, Any] = {"Env": [f"PATH={DEFAULT_PATH}"]}
    if entrypoint:
        image_config["Entrypoint"] = list(entrypoint)
    if cmd:
        image_config["Cmd"] = list(cmd)
    config = _json(
        {
            "architecture": go_arch(),
            "os": "linux",
            "config": image_config,
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": _descriptor(CONFIG_MEDIA_TYPE, config),
            "layers": [_descriptor(LAYER_MEDIA_TYPE, layer)],
        }
    )
    index = _json(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    **_descriptor(MANIFEST_MEDIA_TYPE, manifest),
                    "annotations": {
                        CONTAINERD_NAME_ANNOTATION: ref,
                        OCI_REF_ANNOTATION: ref.rsplit(":", 1)[1],
                    },
                    "platform": {"architecture": go_arch(), "os": "linux"},
                }
            ],
        }
    )
    members = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": index,
        **{f"blobs/sha256/{_digest(b)[7:]}": b for b in (layer, config, manifest)},
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    with tarfile.open(partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))
    partial.replace(dest)
    return _digest(config)


def busybox_files(busybox: Path = Path("/bin/busybox")) -> ImageFiles:
    """A busybox root filesystem: the static binary as ``/bin/busybox`` with a link for
    each applet it lists, ``/tmp`` and a minimal ``/etc/passwd`` (root and nobody)."""
    listed = subprocess.run(
        [str(busybox), "--list"], capture_output=True, text=True, check=False
    ).stdout.split()
    if "sh" not in listed:
        raise ValueError(
            f"{busybox} lists no 'sh' applet: expected the static busybox of Debian's "
            "busybox-static package (make node-packages installs it)"
        )
    passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
    return ImageFiles(
        files={"/bin/busybox": (busybox.read_bytes(), 0o755), "/etc/passwd": (passwd, 0o644)},
        symlinks={f"/bin/{name}": "busybox" for name in listed if name != "busybox"},
        directories={"/tmp": 0o1777, "/root": 0o700},
    )


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": _digest(data), "size": len(data)}
