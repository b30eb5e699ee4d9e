"""Helm chart exports, computed once per content and kept for later runs.

Exporting a stack's chart renders the operator's construct for every variant of its
values: most of a minute of one core. The tests that read an export take it from here: it
is written once into ``$KUBETRAIN_CACHE/charts/<stack>-<version>-<key>``, the key being a
digest of the stack (its ``repr``: every prop), kubetrain's and the stacks' sources and
the versions of the cdk8s packages, so a change to any of them exports again and nothing
stale is read. Writers render into a directory of their own and rename it into place,
so two runs exporting the same chart at once do not break each other.

Also the ``helm`` fixture (the real helm, ``HelmRunner``): a plugin the root conftest
loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from cluster.tools import find_tools

if TYPE_CHECKING:
    from kubetrain.gitops.stack import Stack

ROOT = Path(__file__).resolve().parent.parent
#: The chart's folder name (``kubetrain.gitops.helm.CHART_NAME``; a test holds them equal).
CHART_NAME = "kubetrain"
#: What an export is made from, besides the stack's props.
SOURCES = ("kubetrain", "stacks")
PACKAGES = ("cdk8s", "constructs", "jsii")


def chart_files(stack: Stack) -> dict[str, str]:
    """``kubetrain.gitops.helm.chart_files``, imported when first needed: this module is a
    plugin of every test process, most of which never export a chart (the generator
    loads cdk8s and its Node.js kernel)."""
    from kubetrain.gitops.helm import chart_files as export

    return export(stack)


def cache_root() -> Path:
    base = os.environ.get("KUBETRAIN_CACHE") or str(Path.home() / ".cache" / "kubetrain")
    return Path(base) / "charts"


@cache
def sources_digest() -> str:
    """A digest of every file the export's code is made of, and of its packages."""
    digest = hashlib.sha256()
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(ROOT).as_posix().encode())
                digest.update(path.read_bytes())
    for package in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(f"{package}=={metadata.version(package)}".encode())
    return digest.hexdigest()


def chart_key(stack: Stack) -> str:
    digest = hashlib.sha256(sources_digest().encode())
    digest.update(repr(stack).encode())
    return f"{stack.name}-{stack.version}-{digest.hexdigest()[:16]}"


def exported_chart(stack: Stack) -> Path:
    """The chart folder of ``stack`` (``.../kubetrain``), exported unless the cache holds
    it already."""
    target = cache_root() / chart_key(stack)
    chart = target / CHART_NAME
    if (target / ".done").exists():
        return chart
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for rel, text in sorted(chart_files(stack).items()):
            path = staging / CHART_NAME / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (staging / ".done").touch()
        if target.exists() and not (target / ".done").exists():
            shutil.rmtree(target, ignore_errors=True)  # left half-written by a killed run
        try:
            staging.rename(target)
        except OSError:  # another run put the same export there first
            if not (target / ".done").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return chart


def exported_files(stack: Stack) -> dict[str, str]:
    """Every file of ``stack``'s chart by path (``chart_files``), from the cache."""
    chart = exported_chart(stack)
    return {
        p.relative_to(chart).as_posix(): p.read_text()
        for p in sorted(chart.rglob("*"))
        if p.is_file()
    }


class HelmRunner:
    """The real helm (``find_tools().helm``) with its config, cache and data homes under
    ``home``; a call returns the finished process (``values`` go in on ``-f -``)."""

    def __init__(self, home: Path) -> None:
        self.env = dict(os.environ)
        for name in ("HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"):
            self.env[name] = str(home / name.lower())
        self.binary = str(find_tools(only=("helm",)).helm)

    def __call__(
        self, *args: str, values: dict[str, Any] | None = None
    ) -> subprocess.CompletedProcess[str]:
        extra = ["-f", "-"] if values is not None else []
        return subprocess.run(
            [self.binary, *args, *extra],
            input=yaml.safe_dump(values) if values is not None else None,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )


@pytest.fixture
def helm(tmp_path: Path) -> HelmRunner:
    """The real helm, its config, cache and data homes in the test's tmp dir."""
    return HelmRunner(tmp_path / "helm-home")
