"""The images of the real node's containerd (namespace ``k8s.io``, where the CRI, and so
the kubelet, looks): listed and imported with ``ctr`` over the node's own socket, from
archives or from the local containers storage that podman and buildah build into.
No registry is reachable here: pods run these with ``imagePullPolicy: IfNotPresent``
or ``Never``.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import IO

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
        found = subprocess.run(
            ["podman", "image", "inspect", "--format", "{{.Digest}} {{.ID}}", ref],
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode != 0:
            raise ImageError(
                f"podman has no image {ref!r} ({found.stderr.strip()}): build it "
                "first (make images)"
            )
        image_id = "sha256:" + found.stdout.split()[1]
        if self._config_id(ref) == image_id:
            return False
        # A docker archive: ctr names the image after its RepoTags, as the kubelet asks.
        with tempfile.TemporaryFile() as errors:
            save = subprocess.Popen(
                ["podman", "save", "--format", "docker-archive", ref],
                stdout=subprocess.PIPE,
                stderr=errors,
            )
            assert save.stdout is not None
            self._ctr_stdin(["images", "import", "-"], save.stdout)
            if save.wait() != 0:
                errors.seek(0)
                raise ImageError(f"podman save {ref} failed: {errors.read().decode()[-500:]}")
        return True

    def import_files(self, ref: str, files: ImageFiles, *, entrypoint: list[str]) -> None:
        """Write ``files`` as image ``ref`` and import it (the pause image, test images)."""
        archive = self.archives_dir / (ref.replace("/", "_").replace(":", "_") + ".tar")
        write_image_archive(archive, normalize_ref(ref), files, entrypoint=entrypoint)
        self.import_archive(archive)

    def _ctr_args(self, *args: str) -> list[str]:
        return ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args]

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

    def _config_id(self, ref: str) -> str | None:
        out = self.ctr("images", "list", f"name=={normalize_ref(ref)}", check=False) or ""
        lines = out.splitlines()[1:]
        if not lines:
            return None
        # The CRI reports an image's id as its config digest; ctr lists the manifest's.
        target = lines[0].split()[2]
        blob = run(self._ctr_args("content", "get", target), check=False)
        try:
            return str(json.loads(blob)["config"]["digest"])
        except (ValueError, KeyError):
            return None


def normalize_ref(ref: str) -> str:
    """``ref`` as containerd and the kubelet name it (``docker.io/library/`` added to
    short names, as the kubelet does before asking the CRI)."""
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref
