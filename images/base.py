"""Base images made from Debian's archive, for machines that cannot pull from a registry.

The Dockerfiles start ``FROM python:3.11-slim-bookworm``. Where no registry is reachable,
``mmdebstrap`` builds a Debian bookworm root file system with Python 3.11 and ``podman
import`` stores it as ``localhost/python:3.11-slim-bookworm``; with no search registries
configured, the unchanged FROM line resolves to it. The image offers what the Dockerfiles
use of the official one: ``python``, ``pip`` (installing system-wide, as the official image
does), ``python -m venv``, ``useradd``/``groupadd`` and the CA certificates.

Each base is cached twice, both keyed by a hash of its recipe: the root file system as a
tar under the cache directory (so a new containers-storage needs no second debootstrap)
and the imported image, labelled with the key (so a warm run imports nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from images import podman

#: The label that records which recipe an imported base was made from.
RECIPE_LABEL = "org.kubetrain.base-recipe"


@dataclass(frozen=True)
class BaseImage:
    """A root file system made by mmdebstrap from Debian packages, imported as ``name``."""

    name: str
    """The reference the Dockerfiles' FROM lines use (stored under ``localhost/``)."""
    suite: str
    packages: tuple[str, ...]
    sources: tuple[str, ...]
    """apt source lines: the release, its updates and its security archive."""
    dpkg_options: tuple[str, ...] = ()
    customize: tuple[str, ...] = ()
    """Shell commands run on the finished root file system (``$1`` is its path)."""
    config: tuple[str, ...] = ()
    """Dockerfile instructions for the image configuration (``podman import --change``)."""

    def key(self) -> str:
        """A hash of everything that shapes the image: equal keys, equal recipes."""
        recipe = json.dumps(self.__dict__, sort_keys=True)
        return hashlib.sha256(recipe.encode()).hexdigest()

    def tar_path(self, cache: Path) -> Path:
        safe = self.name.replace("/", "_").replace(":", "_")
        return cache / "base" / f"{safe}-{self.key()[:16]}.tar"

    def command(self, output: Path) -> list[str]:
        return [
            "mmdebstrap",
            "--variant=minbase",
            "--mode=root",
            "--format=tar",
            '--aptopt=APT::Install-Recommends "false"',
            *(f"--dpkgopt={option}" for option in self.dpkg_options),
            f"--include={','.join(self.packages)}",
            *(f"--customize-hook={hook}" for hook in self.customize),
            self.suite,
            str(output),
            *self.sources,
        ]


_DEBIAN = "http://deb.debian.org/debian"

#: Debian bookworm's Python 3.11, the same minor version as the official image.
PYTHON_SLIM = BaseImage(
    name="python:3.11-slim-bookworm",
    suite="bookworm",
    packages=(
        "python3",
        "python3-venv",
        "python3-pip",
        "python-is-python3",
        "ca-certificates",
        "passwd",
    ),
    sources=(
        f"deb {_DEBIAN} bookworm main",
        f"deb {_DEBIAN} bookworm-updates main",
        f"deb {_DEBIAN}-security bookworm-security main",
    ),
    # Like Debian's own slim images: no manual pages, documentation or translations
    # (copyright files stay). The settings stay in the image, so later apt installs obey.
    dpkg_options=(
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/locale/*",
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",
    ),
    customize=(
        # Debian marks its Python as externally managed (PEP 668), so a bare
        # `pip install` would refuse; in an image, as in the official one, it is the way
        # to install. Debian's pip installs under /usr/local, apart from apt's packages.
        'rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED',
        # A comment-only pip.conf: builds mount the machine's over it, and a mount point
        # that is already a file leaves nothing new behind in the image.
        'printf "# pip settings (a build may mount its own over this file)\\n" > "$1"/etc/pip.conf',
        'rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*.log',
    ),
    config=("ENV LANG=C.UTF-8", 'CMD ["python3"]'),
)

#: Every base image the Dockerfiles may start from, by the name their FROM lines use.
BASES: dict[str, BaseImage] = {PYTHON_SLIM.name: PYTHON_SLIM}


_REPORTED: set[str] = set()


def local_name(base: BaseImage) -> str:
    return f"localhost/{base.name}"


def ensure(base: BaseImage, cache: Path) -> str:
    """Make ``base`` present in containers-storage, from the cache when possible; its id."""
    name = local_name(base)
    key = base.key()
    if podman.label(name, RECIPE_LABEL) == key:
        if name not in _REPORTED:
            print(f"[images] base {base.name}: up to date", flush=True)
            _REPORTED.add(name)
        return podman.image_id(name)
    tar = base.tar_path(cache)
    if not tar.exists():
        _debootstrap(base, tar)
    else:
        print(f"[images] base {base.name}: importing the cached {tar}", flush=True)
    previous = podman.image_id_or_none(name)
    changes = [*base.config, f"LABEL {RECIPE_LABEL}={key}"]
    command = ["podman", "import", "--quiet"]
    for change in changes:
        command += ["--change", change]
    subprocess.run([*command, str(tar), name], check=True, stdout=subprocess.DEVNULL)
    if previous is not None:
        podman.remove_if_untagged(previous)
    return podman.image_id(name)


def _debootstrap(base: BaseImage, tar: Path) -> None:
    print(
        f"[images] base {base.name}: mmdebstrap {base.suite} with {', '.join(base.packages)}"
        " (about 30 s to 2 min, once per recipe)",
        flush=True,
    )
    tar.parent.mkdir(parents=True, exist_ok=True)
    for stale in tar.parent.glob(f"{tar.name.rsplit('-', 1)[0]}-*.tar"):
        stale.unlink(missing_ok=True)  # another recipe's tar for the same name: disk is scarce
    # This process's own: a build beside it (another checkout's) writes another file,
    # and the rename publishes a complete tar.
    partial = tar.with_name(f"{tar.name}.partial-{os.getpid()}")
    result = subprocess.run(
        base.command(partial), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        sys.stdout.write(result.stdout)
        raise SystemExit(f"[images] mmdebstrap failed for {base.name} (output above)")
    partial.rename(tar)
