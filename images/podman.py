"""containers-storage through podman: image ids, labels, sizes, clean-up, running.

Running a container here needs two settings in a ``containers.conf`` (pointed to by
``CONTAINERS_CONF``): ``runc`` as the runtime, since crun refuses cgroup v1 hybrid mode,
and explicit default ulimits, since the sandbox may not raise RLIMIT_NOFILE to podman's
default. :func:`containers_conf` writes that file; :func:`run` uses it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

CONTAINERS_CONF = """\
# Written by images/podman.py for running the kubetrain images with podman here.
[containers]
# The sandbox cannot raise RLIMIT_NOFILE to podman's default (setrlimit fails).
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
# crun does not support cgroup v1 hybrid mode; runc does.
runtime = "runc"
"""


def cache_dir() -> Path:
    """``$KUBETRAIN_CACHE`` (as the Makefile sets it), else ``~/.cache/kubetrain``."""
    configured = os.environ.get("KUBETRAIN_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kubetrain"


def containers_conf(directory: Path) -> Path:
    """Write the containers.conf that lets podman run containers here; its path."""
    path = directory / "containers.conf"
    if not path.exists() or path.read_text() != CONTAINERS_CONF:
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(CONTAINERS_CONF)
    return path


def _inspect(reference: str) -> dict[str, object] | None:
    result = subprocess.run(
        ["podman", "image", "inspect", reference], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return None
    found = json.loads(result.stdout)
    return found[0] if found else None


def image_id_or_none(reference: str) -> str | None:
    image = _inspect(reference)
    return str(image["Id"]) if image else None


def image_id(reference: str) -> str:
    found = image_id_or_none(reference)
    if found is None:
        raise LookupError(f"image {reference} is not in containers-storage")
    return found


def config(reference: str) -> dict[str, object]:
    """The image's OCI configuration (User, Entrypoint, Cmd, Env, Labels, ...)."""
    image = _inspect(reference)
    if image is None:
        raise LookupError(
            f"image {reference} is not in containers-storage: build it with `make images`"
        )
    value = image.get("Config") or {}
    assert isinstance(value, dict)
    return value


def label(reference: str, name: str) -> str | None:
    image = _inspect(reference)
    if image is None:
        return None
    labels = image.get("Labels") or {}
    assert isinstance(labels, dict)
    value = labels.get(name)
    return str(value) if value is not None else None


def size(reference: str) -> int:
    """The image's size in bytes, every layer counted (as ``podman images`` shows it)."""
    image = _inspect(reference)
    if image is None:
        raise LookupError(f"image {reference} is not in containers-storage")
    return int(str(image["Size"]))


def dangling() -> set[str]:
    """Ids of images without a tag."""
    result = subprocess.run(
        ["podman", "images", "--quiet", "--no-trunc", "--filter", "dangling=true"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.removeprefix("sha256:") for line in result.stdout.split()}


def working_containers() -> set[str]:
    """Ids of buildah's working containers (builds remove theirs, but not always all)."""
    result = subprocess.run(
        ["buildah", "containers", "--quiet", "--notruncate"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(result.stdout.split())


def remove_containers(containers: set[str]) -> None:
    for container in sorted(containers):
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def remove_if_untagged(image: str) -> None:
    """Remove an image a rebuild replaced, if nothing else uses it (no copies kept)."""
    if image.removeprefix("sha256:") in dangling():
        subprocess.run(
            ["podman", "rmi", image], capture_output=True, check=False
        )  # still used by a container or another image's layers: keep it


def run(
    image: str,
    *command: str,
    entrypoint: str | None = None,
    options: tuple[str, ...] = (),
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """``podman run --rm`` with the containers.conf this machine needs; no network."""
    env = dict(os.environ, CONTAINERS_CONF=str(containers_conf(cache_dir() / "images")))
    argv = ["podman", "run", "--rm", "--network", "none", *options]
    if entrypoint is not None:
        argv.append(f"--entrypoint={entrypoint}")
    return subprocess.run(
        [*argv, image, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
