"""The images of the real node's containerd (namespace ``k8s.io``, where the CRI, and so
the kubelet, looks): listed and imported with ``ctr`` over the node's own socket, from
archives or from the local containers storage that podman and buildah build into.
No registry is reachable here: pods run these with ``imagePullPolicy: IfNotPresent``
or ``Never``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any

from cluster.host import HostError, run
from cluster.oci import ImageFiles, write_image_archive


class ImageError(RuntimeError):
    """An image could not be found or imported."""


class NodeImages:
    """The images of the containerd listening on ``socket``; archives kubetrain writes
    (``import_files``) are kept in ``archives_dir``."""

    def __init__(self, socket: Path, archives_dir: Path) -> None:
        self.socket = socket
        self.archives_dir = archives_dir

    def ids(self) -> dict[str, str]:
        """The images in the node's containerd (namespace ``k8s.io``): reference -> id."""
        out = self.ctr("images", "list") or ""
        ids: dict[str, str] = {}
        for line in out.splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 3:
                ids[fields[0]] = fields[2]
        return ids

    def import_archive(self, archive: Path) -> None:
        """Import an OCI or docker archive (``podman save`` output)."""
        with archive.open("rb") as data:
            self._ctr_stdin(["images", "import", "-"], data)

    def import_image(self, ref: str) -> bool:
        """Copy ``ref`` from the local containers storage (what podman and buildah build,
        e.g. ``make images``) into the node, unless the node has it with the same id;
        return whether it was imported. Pods then run it with ``imagePullPolicy:
        IfNotPresent`` or ``Never`` (no registry is reachable)."""
        return bool(self.import_images([ref]))

    def import_images(self, refs: list[str]) -> list[str]:
        """Copy those of ``refs`` the node lacks (or has with another id) from the local
        containers storage in one archive, so layers the images share travel once;
        return the refs imported.

        Disk is what bounds this (the trainer images are GBs each), so: podman's
        temporary copy of a layer lives under ``archives_dir`` and goes when the import
        ends, failed or not; and once containerd has unpacked the layers into its
        snapshots, their blobs are deleted from its content store (what the CRI's
        ``discard_unpacked_layers`` does for pulls): containers start from the
        snapshots, and an image's manifest and config stay."""
        wanted = [
            ref for ref in dict.fromkeys(refs) if self._config_id(ref) != podman_image_id(ref)
        ]
        if not wanted:
            return []
        self.archives_dir.mkdir(parents=True, exist_ok=True)
        with (
            tempfile.TemporaryDirectory(prefix="podman-save-", dir=self.archives_dir) as tmp,
            tempfile.TemporaryFile() as errors,
        ):
            # A docker archive: ctr names each image after its RepoTags, as the kubelet
            # asks for it.
            save = subprocess.Popen(
                ["podman", "save", "--format", "docker-archive", "--multi-image-archive", *wanted],
                stdout=subprocess.PIPE,
                stderr=errors,
                env={**os.environ, "TMPDIR": tmp},
            )
            assert save.stdout is not None
            try:
                self._ctr_stdin(["images", "import", "-"], save.stdout)
            finally:
                # A failed import closes the pipe early: podman ends on it, or is ended.
                save.stdout.close()
                try:
                    save.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    save.kill()
                    save.wait()
            if save.returncode != 0:
                errors.seek(0)
                raise ImageError(
                    f"podman save {' '.join(wanted)} failed: {errors.read().decode()[-500:]}"
                )
        for ref in wanted:
            self._discard_layers(ref)
        return wanted

    def _discard_layers(self, ref: str) -> None:
        """Delete the layer blobs of ``ref`` (unpacked already) from the content store."""
        manifest = self._manifest(ref)
        if manifest is None:
            raise ImageError(f"ctr imported {ref!r} but lists no image of that name")
        layers = [layer["digest"] for layer in manifest.get("layers", [])]
        if layers:
            # Blobs another image shared and this loop deleted already are not an error.
            self.ctr("content", "rm", *layers, check=False)

    def import_files(self, ref: str, files: ImageFiles, *, entrypoint: list[str]) -> None:
        """Write ``files`` as image ``ref`` and import it (the pause image, test images)."""
        archive = self.archives_dir / (ref.replace("/", "_").replace(":", "_") + ".tar")
        write_image_archive(archive, normalize_ref(ref), files, entrypoint=entrypoint)
        self.import_archive(archive)

    def ctr_prefix(self) -> list[str]:
        """``ctr`` talking to this containerd, in namespace ``k8s.io``."""
        return ["ctr", "--address", str(self.socket), "--namespace", "k8s.io"]

    def _ctr_args(self, *args: str) -> list[str]:
        return [*self.ctr_prefix(), *args]

    def ctr(self, *args: str, check: bool = True) -> str | None:
        try:
            return run(self._ctr_args(*args))
        except HostError:
            if check:
                raise
            return None

    def _ctr_stdin(self, args: list[str], data: IO[bytes]) -> None:
        proc = subprocess.run(
            self._ctr_args(*args),
            stdin=data,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise ImageError(f"ctr {' '.join(args)} failed: {proc.stderr.decode()[-500:]}")

    def _manifest(self, ref: str) -> dict[str, Any] | None:
        out = self.ctr("images", "list", f"name=={normalize_ref(ref)}", check=False) or ""
        lines = out.splitlines()[1:]
        if not lines:
            return None
        # ctr lists the manifest's digest (a docker archive imports one manifest).
        target = lines[0].split()[2]
        blob = self.ctr("content", "get", target, check=False)
        try:
            manifest = json.loads(blob or "")
        except ValueError:
            return None
        return manifest if isinstance(manifest, dict) else None

    def _config_id(self, ref: str) -> str | None:
        """The id the CRI reports for ``ref`` (its config digest), if the node has it."""
        manifest = self._manifest(ref)
        try:
            return str(manifest["config"]["digest"]) if manifest else None
        except (KeyError, TypeError):
            return None


def podman_image_id(ref: str) -> str:
    """The id of ``ref`` in the local containers storage (``sha256:...``)."""
    found = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.ID}}", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise ImageError(
            f"podman has no image {ref!r} ({found.stderr.strip()}): build it first (make images)"
        )
    return "sha256:" + found.stdout.strip()


def normalize_ref(ref: str) -> str:
    """``ref`` as containerd and the kubelet name it (``docker.io/library/`` added to
    short names, as the kubelet does before asking the CRI)."""
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref
