"""The real node's image store (``cluster/node_store.py``): one node at a time holds it,
a dead holder's claim gives way, and a release drops the containers' CRI records."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cluster.node_store import CRI_DIRS, NodeStore, containerd_version


def _node(tmp_path: Path, name: str, *, containerd_pid: int | None) -> Path:
    root = tmp_path / name / "node"
    (root / "pids").mkdir(parents=True)
    if containerd_pid is not None:
        (root / "pids" / "containerd.pid").write_text(f"{containerd_pid}\n")
    return root


def test_the_first_node_gets_the_store_and_a_second_running_one_does_not(
    tmp_path: Path,
) -> None:
    store = NodeStore(tmp_path / "store")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        first = _node(tmp_path, "first", containerd_pid=sleeper.pid)
        second = _node(tmp_path, "second", containerd_pid=None)
        assert store.claim(first) == store.root
        assert store.owner() == first and store.holds(first)
        assert store.claim(second) is None, "a running holder's store was handed over"
        assert store.claim(first) == store.root, "the holder itself was refused"
    finally:
        sleeper.kill()
        sleeper.wait()
    # The holder's containerd is gone (a killed session): the next node takes over.
    assert store.owner() is None
    assert store.claim(second) == store.root and store.holds(second)
    assert not store.holds(first)


def test_release_forgets_the_containers_records_and_keeps_the_images(tmp_path: Path) -> None:
    store = NodeStore(tmp_path / "store")
    node = _node(tmp_path, "one", containerd_pid=None)
    assert store.claim(node) == store.root
    images = store.root / "io.containerd.metadata.v1.bolt"
    images.mkdir(parents=True)
    (images / "meta.db").write_text("images\n")
    for sub in CRI_DIRS:
        (store.root / sub / "abc123").mkdir(parents=True)
    other = _node(tmp_path, "other", containerd_pid=None)
    store.release(other, forgotten=True)  # not the holder: nothing happens
    assert store.holds(node) and all((store.root / sub / "abc123").exists() for sub in CRI_DIRS)
    store.release(node, forgotten=True)
    assert not store.owner_file.exists()
    assert [sub for sub in CRI_DIRS if (store.root / sub).exists()] == []
    assert (images / "meta.db").read_text() == "images\n"


def test_a_node_whose_containerd_died_leaves_its_containers_to_the_next(tmp_path: Path) -> None:
    # Its containers were not deleted through containerd: their records stay, so that
    # the next node's containerd loads them (as exited) and its kubelet removes them.
    store = NodeStore(tmp_path / "store")
    node = _node(tmp_path, "one", containerd_pid=None)
    assert store.claim(node) == store.root
    for sub in CRI_DIRS:
        (store.root / sub / "abc123").mkdir(parents=True)
    store.release(node, forgotten=False)
    assert not store.owner_file.exists()
    assert all((store.root / sub / "abc123").exists() for sub in CRI_DIRS)


def test_without_containerd_the_store_is_named_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    # A node's down() runs even where containerd was never installed: it must not fail.
    monkeypatch.setenv("PATH", "/nonexistent")
    assert containerd_version() == "unknown"
