"""cluster.host's cgroup reading, on a directory tree shaped like a cgroup hierarchy."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cluster import host


def _group(root: Path, path: str, pids: str) -> None:
    (root / path).mkdir(parents=True)
    (root / path / "cgroup.procs").write_text(pids, encoding="ascii")


def test_cgroup_pids_reads_every_level_and_survives_a_group_removed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container's cgroup can go away while the tree is being read (CI's RSS sampler
    died of FileNotFoundError that way): the groups still there are read, nothing raises."""
    cpuset, memory = tmp_path / "cpuset", tmp_path / "memory"
    _group(cpuset, "kt/kubepods/pod1/c1", "10\n11\n")
    _group(cpuset, "kt/kubepods/pod1/c2", "12\n")
    _group(memory, "kt", "")
    monkeypatch.setattr(host, "cgroup_hierarchies", lambda: [cpuset, memory])
    assert host.cgroup_pids("kt") == {10, 11, 12}
    assert host.cgroup_pids("absent") == set()

    scandir = os.scandir

    def racing_scandir(path: int | str | os.PathLike[str]) -> object:
        # The container's group is removed between being listed and being opened.
        if not isinstance(path, int) and Path(path).name == "c2":
            shutil.rmtree(path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", racing_scandir)
    assert host.cgroup_pids("kt") == {10, 11}
