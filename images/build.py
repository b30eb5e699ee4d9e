"""Build every image under images/ with buildah, with no registry: ``make images``.

    python -m images.build [--horovod-wheels DIR] [NAME ...]

Each image is built by ``buildah bud --isolation chroot --pull=never`` from its Dockerfile
as committed, with the repository root as the build context. Base images that no registry
can provide are made from Debian's archive first (``images.base``). Builds see the
machine's pip configuration and CA bundle (mounted read-only), so pip reaches PyPI
through whatever proxy the machine uses.

Builds are cached by content: an image's key hashes its Dockerfile, the build-context
files it COPYs, its build arguments and the ids of the images it starts FROM. The key is
stored as a label on the image; a build is skipped when the tagged image carries the key
already. A rebuilt image replaces the old one, which is removed (no copies kept).

``--horovod-wheels`` names a directory with a Horovod wheel already built for this torch
and Python (the one ``make training-deps`` caches). It is mounted into the build and
listed in the build's pip ``find-links``; ``build-horovod-wheel.sh`` then installs that
wheel instead of compiling Horovod again. It is not part of the key: the wheel is built
from the same source by the same script, so the image does the same either way.
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import io
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from images import base, dockerfile, podman
from kubetrain import __version__

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The label that records the key an image was built from.
KEY_LABEL = "org.kubetrain.build-key"
REGISTRY = "ghcr.io/kubetrain"
MACHINE_PIP_CONF = Path("/etc/pip.conf")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: Where a build sees the prebuilt wheels (an empty directory in every Debian image).
WHEELHOUSE_MOUNT = "/mnt"


@dataclass(frozen=True)
class ImageSpec:
    """One image: its folder under images/, the tag the stacks use, its build arguments."""

    folder: str
    repository: str
    build_args: dict[str, str] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        return f"{REGISTRY}/{self.repository}:{__version__}"

    @property
    def dockerfile_path(self) -> Path:
        return REPO_ROOT / "images" / self.folder / "Dockerfile"

    @property
    def ignorefile(self) -> Path:
        return REPO_ROOT / "images" / self.folder / "Dockerfile.dockerignore"

    def instructions(self) -> list[dockerfile.Instruction]:
        return dockerfile.parse(self.dockerfile_path.read_text())

    def base_images(self) -> list[str]:
        return dockerfile.base_images(self.instructions(), self.build_args)


OPERATOR = ImageSpec("operator", "operator")
PYTORCH = ImageSpec("pytorch", "pytorch-trainer")
# PyPI's tensorflow-cpu: the CUDA libraries of the default `tensorflow[and-cuda]` are
# gigabytes that nothing here could use.
TENSORFLOW = ImageSpec("tensorflow", "tensorflow-trainer", {"TENSORFLOW_PACKAGE": "tensorflow-cpu"})
# Built on the PyTorch trainer, so the two share its torch layer.
HOROVOD = ImageSpec("horovod", "horovod-trainer", {"TRAINER_IMAGE": PYTORCH.tag})

#: Every image, in build order (an image comes after the images it starts FROM).
IMAGES: tuple[ImageSpec, ...] = (OPERATOR, PYTORCH, HOROVOD, TENSORFLOW)


def ignore_patterns(spec: ImageSpec) -> list[str]:
    lines = spec.ignorefile.read_text().splitlines() if spec.ignorefile.exists() else []
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def is_ignored(path: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore excludes this context-relative path (or a folder above it)."""
    parts = PurePosixPath(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        if any(fnmatch(prefix, pattern) for prefix in prefixes):
            return True
        if pattern.startswith("**/") and any(fnmatch(part, pattern[3:]) for part in parts):
            return True
    return False


def context_files(spec: ImageSpec) -> list[Path]:
    """The build-context files the Dockerfile COPYs, folders expanded, sorted."""
    patterns = ignore_patterns(spec)
    files: set[Path] = set()
    for copy in dockerfile.context_copies(spec.instructions()):
        for source in copy.sources:
            path = REPO_ROOT / source
            if not path.exists():
                raise SystemExit(f"[images] {spec.folder}: COPY source {source} is missing")
            candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            files.update(
                p for p in candidates if not is_ignored(str(p.relative_to(REPO_ROOT)), patterns)
            )
    return sorted(files)


def build_key(spec: ImageSpec, base_ids: dict[str, str]) -> str:
    """The content key: Dockerfile, copied files, build arguments, base image ids."""
    digest = hashlib.sha256()

    def add(name: str, data: bytes) -> None:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)

    add("Dockerfile", spec.dockerfile_path.read_bytes())
    add(".dockerignore", spec.ignorefile.read_bytes() if spec.ignorefile.exists() else b"")
    for path in context_files(spec):
        relative = str(path.relative_to(REPO_ROOT))
        add(f"file:{relative}:{path.stat().st_mode & 0o111:o}", path.read_bytes())
    for name, value in sorted(spec.build_args.items()):
        add(f"arg:{name}", value.encode())
    for reference in spec.base_images():
        add(f"from:{reference}", base_ids[reference].encode())
    return digest.hexdigest()


def resolve_bases(spec: ImageSpec, cache: Path) -> dict[str, str]:
    """Ids of the images ``spec`` starts FROM, making Debian bases when needed."""
    ids: dict[str, str] = {}
    for reference in spec.base_images():
        if reference in base.BASES:
            ids[reference] = base.ensure(base.BASES[reference], cache)
            continue
        found = podman.image_id_or_none(reference)
        if found is None:
            raise SystemExit(
                f"[images] {spec.folder}: base image {reference} is neither built here"
                f" (one of {[s.tag for s in IMAGES]}) nor made from Debian"
                f" ({sorted(base.BASES)}); no registry is reachable to pull it"
            )
        ids[reference] = found
    return ids


def current_key(spec: ImageSpec) -> str | None:
    """The key the stored image was built from, or None when it is absent."""
    return podman.label(spec.tag, KEY_LABEL)


def expected_key(spec: ImageSpec) -> str:
    """The key ``spec`` would be built with now, from the images already stored."""
    ids = {}
    for reference in spec.base_images():
        name = base.local_name(base.BASES[reference]) if reference in base.BASES else reference
        ids[reference] = podman.image_id(name)
    return build_key(spec, ids)


def pip_conf(directory: Path, find_links: str | None) -> Path:
    """The machine's pip configuration, plus ``find-links`` when a wheelhouse is mounted."""
    parser = configparser.ConfigParser()
    if MACHINE_PIP_CONF.exists():
        parser.read(MACHINE_PIP_CONF)
    if find_links is not None:
        if not parser.has_section("global"):
            parser.add_section("global")
        existing = parser.get("global", "find-links", fallback="").split()
        parser.set("global", "find-links", "\n".join([*existing, find_links]))
    text = io.StringIO()
    parser.write(text)
    path = directory / "pip.conf"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Written by images/build.py for builds; mounted at /etc/pip.conf.\n" + text.getvalue()
    )
    return path


def buildah_command(
    spec: ImageSpec, key: str, pip_config: Path | None, wheelhouse: Path | None
) -> list[str]:
    command = [
        "buildah", "bud", "--isolation", "chroot", "--pull=never",
        "--file", str(spec.dockerfile_path), "--ignorefile", str(spec.ignorefile),
        "--tag", spec.tag, "--label", f"{KEY_LABEL}={key}",
    ]  # fmt: skip
    for name, value in sorted(spec.build_args.items()):
        command += ["--build-arg", f"{name}={value}"]
    if pip_config is not None:
        command += ["--volume", f"{pip_config}:/etc/pip.conf:ro"]
    if CA_BUNDLE.exists():
        command += ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]
    if wheelhouse is not None:
        command += ["--volume", f"{wheelhouse}:{WHEELHOUSE_MOUNT}:ro"]
    return [*command, str(REPO_ROOT)]


@dataclass(frozen=True)
class Outcome:
    spec: ImageSpec
    built: bool
    seconds: float


def build(spec: ImageSpec, cache: Path, horovod_wheels: Path | None) -> Outcome:
    started = time.monotonic()
    key = build_key(spec, resolve_bases(spec, cache))
    if current_key(spec) == key:
        print(f"[images] {spec.tag}: up to date (key {key[:12]})", flush=True)
        return Outcome(spec, False, time.monotonic() - started)
    wheelhouse = horovod_wheels if spec is HOROVOD and horovod_wheels else None
    if wheelhouse is not None and not any(wheelhouse.glob("horovod-*.whl")):
        wheelhouse = None
    pip_config = None
    if wheelhouse is not None or MACHINE_PIP_CONF.exists():
        pip_config = pip_conf(
            cache / "images" / spec.folder, WHEELHOUSE_MOUNT if wheelhouse else None
        )
    print(f"[images] {spec.tag}: building (key {key[:12]})", flush=True)
    if wheelhouse is not None:
        print(f"[images] {spec.tag}: reusing the Horovod wheel in {wheelhouse}", flush=True)
    previous = podman.image_id_or_none(spec.tag)
    dangling_before = podman.dangling()
    containers_before = podman.working_containers()
    try:
        for line in _stream(buildah_command(spec, key, pip_config, wheelhouse)):
            print(f"  {spec.folder}| {line}", flush=True)
    finally:
        # What this build left behind goes: working containers (a stage only mounted by
        # another keeps its own, and a failed build keeps all), untagged intermediate
        # images, and the image it replaced. Other builds' leftovers are not touched.
        podman.remove_containers(podman.working_containers() - containers_before)
        for image in sorted(podman.dangling() - dangling_before):
            podman.remove_if_untagged(image)
    if previous is not None:
        podman.remove_if_untagged(previous)
    seconds = time.monotonic() - started
    print(f"[images] {spec.tag}: built in {seconds:.0f} s", flush=True)
    return Outcome(spec, True, seconds)


def _stream(command: list[str]) -> Iterator[str]:
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            yield line.rstrip("\n")
    if process.returncode != 0:
        raise SystemExit(f"[images] build failed ({process.returncode}): {' '.join(command)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m images.build",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"folders to build (default: all of {[s.folder for s in IMAGES]})",
    )
    parser.add_argument(
        "--horovod-wheels",
        type=Path,
        default=None,
        help="a directory with a prebuilt Horovod wheel to reuse",
    )
    args = parser.parse_args(argv)
    unknown = set(args.names) - {spec.folder for spec in IMAGES}
    if unknown:
        parser.error(f"unknown image(s) {sorted(unknown)}: use {[s.folder for s in IMAGES]}")
    cache = podman.cache_dir()
    started = time.monotonic()
    outcomes = [
        build(spec, cache, args.horovod_wheels)
        for spec in IMAGES
        if not args.names or spec.folder in args.names
    ]
    print(f"[images] done in {time.monotonic() - started:.0f} s", flush=True)
    print(f"  {'image':<45} {'size':>9}  {'time':>7}", flush=True)
    for outcome in outcomes:
        size = podman.size(outcome.spec.tag) / 1e6
        spent = f"{outcome.seconds:.0f} s" if outcome.built else "cached"
        print(f"  {outcome.spec.tag:<45} {size:>6.0f} MB  {spent:>7}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
