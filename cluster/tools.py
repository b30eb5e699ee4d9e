"""Where the control-plane binaries live and which versions they are.

The versions are pinned in one place, the Go modules under ``cluster/tools``; the binaries
are built by ``make cluster-tools`` into a cache outside the repository whose directory
name carries every version (see ``cluster/cluster.mk``, which computes the same path).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

CLUSTER_DIR = Path(__file__).resolve().parent
KUBE_MODULE = CLUSTER_DIR / "tools" / "kubernetes"
KWOK_MODULE = CLUSTER_DIR / "tools" / "kwok"

#: Every binary the local control plane needs, by file name.
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kwokctl",
)


class ToolsMissingError(RuntimeError):
    """The control-plane binaries have not been built (run ``make cluster-tools``)."""


def module_version(go_mod: Path, module: str) -> str:
    """Return the version ``go_mod`` requires for ``module``.

    Raises ``ValueError`` naming the file and module when there is no such requirement.
    """
    for raw in go_mod.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("//") or "=>" in line:
            continue
        fields = line.split()
        if fields and fields[0] == "require":
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == module:
            return fields[1]
    raise ValueError(f"{go_mod} has no requirement on {module}: expected a line '{module} vX.Y.Z'")


@dataclass(frozen=True)
class Versions:
    """The pinned versions of the control-plane components."""

    kubernetes: str
    etcd: str
    kwok: str

    @classmethod
    def pinned(cls) -> Versions:
        """Read the versions from the Go modules under ``cluster/tools``."""
        kube_mod = KUBE_MODULE / "go.mod"
        return cls(
            kubernetes=module_version(kube_mod, "k8s.io/kubernetes"),
            etcd=module_version(kube_mod, "go.etcd.io/etcd/server/v3"),
            kwok=module_version(KWOK_MODULE / "go.mod", "sigs.k8s.io/kwok"),
        )

    @property
    def cache_key(self) -> str:
        """The cache directory name; cluster/cluster.mk builds the same one."""
        return f"kubernetes-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}"


def cache_root() -> Path:
    """``$KUBETRAIN_CACHE``, or ``~/.cache/kubetrain`` as in the Makefile."""
    configured = os.environ.get("KUBETRAIN_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kubetrain"


def tools_dir(versions: Versions | None = None) -> Path:
    """The directory ``make cluster-tools`` builds into for ``versions`` (default pinned)."""
    configured = os.environ.get("KUBETRAIN_CLUSTER_TOOLS_DIR")
    if configured:
        return Path(configured)
    return cache_root() / "cluster-tools" / (versions or Versions.pinned()).cache_key


@dataclass(frozen=True)
class Tools:
    """Paths of the built control-plane binaries."""

    versions: Versions
    bin_dir: Path

    def path(self, name: str) -> Path:
        """The path of binary ``name`` (one of ``BINARIES``)."""
        if name not in BINARIES:
            raise ValueError(f"unknown binary {name!r}: expected one of {', '.join(BINARIES)}")
        return self.bin_dir / name

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    @property
    def kwokctl(self) -> Path:
        return self.path("kwokctl")

    def kubectl_version(self) -> str:
        """``kubectl version --client`` as reported by the binary (e.g. ``v1.34.4``)."""
        out = subprocess.run(
            [str(self.kubectl), "version", "--client", "-o", "json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        version: str = json.loads(out)["clientVersion"]["gitVersion"]
        return version


def find_tools(versions: Versions | None = None) -> Tools:
    """Locate the built binaries, or raise ``ToolsMissingError`` saying how to build them."""
    versions = versions or Versions.pinned()
    bin_dir = tools_dir(versions) / "bin"
    missing = [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise ToolsMissingError(
            f"control-plane binaries missing from {bin_dir}: {', '.join(missing)}; "
            f"expected all of {', '.join(BINARIES)} for Kubernetes {versions.kubernetes}, "
            f"etcd {versions.etcd}, kwok {versions.kwok}. Run `make cluster-tools` to build them."
        )
    return Tools(versions=versions, bin_dir=bin_dir)
