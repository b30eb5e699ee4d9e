"""containerd's root kept from one real node to the next, so that images are imported once.

The trainer images are GBs each; importing them into a new node's containerd (``podman
save`` into ``ctr images import``, then unpacking every layer) takes minutes, and every
node used to start with an empty root. The store is a containerd root directory under
``$KUBETRAIN_CACHE/node-store/``, keyed by containerd's version (its on-disk format), that
one node at a time claims: the node's containerd runs with ``root`` there and its own
``state`` (sockets, mounts, tasks) under the node's directory, so everything that runs
still goes with the node. A node that stops forgets its containers (their snapshots go
with them) and keeps the images; ``NodeImages.import_images`` then skips what the store
has with the same id. A second node while one holds the store gets a root of its own
(empty, as before).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from cluster import host
from cluster.host import HostError, run
from cluster.process import LocalProcess
from cluster.tools import cache_root

log = logging.getLogger(__name__)

OWNER_FILE = "owner"
#: The directories containerd's CRI plugin keeps per container and pod sandbox.
CRI_DIRS = ("io.containerd.grpc.v1.cri/containers", "io.containerd.grpc.v1.cri/sandboxes")


def containerd_version() -> str:
    """containerd's version as a directory name (``1.6.20-ds1``); ``unknown`` without
    containerd (a node's ``down`` runs where none was ever installed, and holds nothing)."""
    try:
        out = run(["containerd", "--version"]).split()
    except (HostError, OSError):
        return "unknown"
    version = out[2] if len(out) > 2 else "unknown"
    return re.sub(r"[^A-Za-z0-9.]+", "-", version).strip("-") or "unknown"


class NodeStore:
    """The shared containerd root at ``path``, claimed by at most one node at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def default(cls) -> NodeStore:
        return cls(cache_root() / "node-store" / f"containerd-{containerd_version()}")

    @property
    def owner_file(self) -> Path:
        return self.path / OWNER_FILE

    def owner(self) -> Path | None:
        """The node directory holding the store, if that node's containerd runs."""
        try:
            text = self.owner_file.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        node_root = Path(text)
        if not text or not containerd_of(node_root).is_running():
            return None
        return node_root

    def claim(self, node_root: Path) -> Path | None:
        """Make ``node_root``'s node the store's holder and return containerd's root for
        it, or ``None`` when another running node holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        with self._locked():
            holder = self.owner()
            if holder is not None and holder != node_root:
                log.info("the node store %s is held by the node in %s", self.path, holder)
                return None
            tmp = self.owner_file.with_suffix(".tmp")
            tmp.write_text(f"{node_root}\n", encoding="utf-8")
            os.replace(tmp, self.owner_file)
        return self.root

    @property
    def root(self) -> Path:
        return self.path / "root"

    def holds(self, node_root: Path) -> bool:
        try:
            return Path(self.owner_file.read_text(encoding="utf-8").strip()) == node_root
        except OSError:
            return False

    def forget_containers(self, ctr: list[str]) -> None:
        """Delete every task and container (their snapshots with them) from the
        containerd that ``ctr`` (a ``ctr --address ... --namespace k8s.io`` prefix)
        talks to: what runs goes with the node, the images stay."""
        for kind in ("tasks", "containers"):
            try:
                ids = run([*ctr, kind, "list", "-q"]).split()
            except HostError:
                return
            for ident in ids:
                command = [*ctr, kind, "delete", *(["--force"] if kind == "tasks" else []), ident]
                run(command, check=False)

    def release(self, node_root: Path, *, forgotten: bool) -> None:
        """After the node's containerd stopped, drop the claim and, when
        ``forget_containers`` deleted its containers (``forgotten``), the CRI plugin's
        records of them. A node whose containerd died first keeps its containers and
        their records in the store: the next node's containerd loads them as exited and
        its kubelet removes them (their snapshots with them)."""
        with self._locked():
            if self.holds(node_root):
                if forgotten:
                    for sub in CRI_DIRS:
                        host.remove_tree(self.root / sub)
                self.owner_file.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.mkdir(parents=True, exist_ok=True)
        with (self.path / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def containerd_of(node_root: Path) -> LocalProcess:
    """The containerd process of the node in ``node_root`` (as ``RealNode.process``)."""
    return LocalProcess(
        "containerd",
        pid_file=node_root / "pids" / "containerd.pid",
        log_file=node_root / "logs" / "containerd.log",
    )
