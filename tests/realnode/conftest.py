"""Fixtures of the real-node tier: the control plane with one real node (a kubelet with
containerd, see ``cluster/node.py``) beside kwok's fake GPU nodes, the images ``make
images`` built imported into that node's containerd, and the ``local`` stack installed as
users install it: its synthesized manifests applied with kubectl, the operator running as
the pods of the stack's own Deployment.

Every CPU pod lands on the real node: kwok's nodes here are GPU nodes, tainted
``nvidia.com/gpu:NoSchedule``, so no job needs a node selector to get there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.local import LocalCluster
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.writer import write_version
from stacks.local import STACK
from tests.ahead import Ahead
from tests.clusters import ClusterClients, fresh_namespace
from tests.integration.kube import list_objects, wait_for, wait_for_established
from tests.realnode.upgrade import write_helm_charts
from tests.realnode.workloads import OPERATOR_NAMESPACE, TRAINER_IMAGES

#: Two operator replicas: the second one is the standby that takes over from the leader.
OPERATOR_REPLICAS = 2
#: The highest RSS the control plane, the node and its containers reached together.
PEAK_KEY = pytest.StashKey[dict[str, int]]()
#: The least free disk space seen (bytes), and what the cluster's directory held at the end.
DISK_KEY = pytest.StashKey[tuple[int, int]]()


@pytest.fixture(scope="session", autouse=True)
def peak_memory(request: pytest.FixtureRequest, real_node_cluster: LocalCluster) -> Iterator[None]:
    """Sample the RSS of everything the tier runs, and the free disk, every 2 s; the
    peak and the low are reported at the end of the session (what this tier needs of
    the machine: the trainer images are GBs in the node's containerd)."""
    peak: dict[str, int] = {}
    least_free = [shutil.disk_usage(real_node_cluster.workdir).free]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(2.0):
            now = real_node_cluster.memory_rss_bytes()
            if sum(now.values()) > sum(peak.values()):
                peak.clear()
                peak.update(now)
            free = shutil.disk_usage(real_node_cluster.workdir).free
            least_free[0] = min(least_free[0], free)

    sampler = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    sampler.start()
    try:
        yield
    finally:
        stop.set()
        sampler.join(timeout=10)
        request.config.stash[PEAK_KEY] = peak
        request.config.stash[DISK_KEY] = (least_free[0], _tree_bytes(real_node_cluster.workdir))


def _tree_bytes(root: Path) -> int:
    """Bytes the files under ``root`` take (``du``; files come and go meanwhile)."""
    total = 0
    # os.walk skips a directory that vanishes while it walks (rglob raises on it).
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    total += path.stat().st_blocks * 512
    return total


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    peak = config.stash.get(PEAK_KEY, {})
    if peak:
        parts = ", ".join(f"{name} {value / 2**20:.0f}" for name, value in sorted(peak.items()))
        terminalreporter.write_line(
            f"real-node tier: peak RSS {sum(peak.values()) / 2**20:.0f} MiB ({parts} MiB)"
        )
    if DISK_KEY in config.stash:
        free, used = config.stash[DISK_KEY]
        terminalreporter.write_line(
            f"real-node tier: least free disk {free / 2**30:.1f} GiB; the cluster's "
            f"directory held {used / 2**30:.1f} GiB at the end"
        )


@pytest.fixture(scope="session")
def node_images(real_node_cluster: LocalCluster) -> list[str]:
    """The operator and trainer images, imported into the real node's containerd."""
    node = real_node_cluster.real_node
    assert node is not None
    node.import_images(list(TRAINER_IMAGES))
    return list(TRAINER_IMAGES)


@pytest.fixture(scope="session", autouse=True)
def helm_charts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ahead[tuple[Path, Path]] | None]:
    """The two charts ``test_helm_upgrade`` installs (``write_helm_charts``), exported from
    the tier's start in a process of their own (``tests/ahead.py``): most of a minute of
    one core each, while the node starts and the images are imported;
    ``None`` when that test is not in the session."""
    if not any(item.path.name == "test_helm_upgrade.py" for item in request.session.items):
        yield None
        return
    charts = Ahead(write_helm_charts)
    try:
        yield charts
    finally:
        charts.stop()


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``local`` stack, synthesized as ``make synth`` does, with two operator replicas
    labelled as upstream Trainer's controller (``found_as_trainer``: the MCP server's test)."""
    operator = dataclasses.replace(
        STACK.operator, replicas=OPERATOR_REPLICAS, found_as_trainer=True
    )
    stack = dataclasses.replace(STACK, operator=operator)
    out = tmp_path_factory.mktemp("stack")
    return write_version(stack, render_charts(stack), out).path


@pytest.fixture(scope="session")
def installed_stack(
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_images: list[str],
    stack_dir: Path,
) -> Path:
    """The stack's CRDs, operator and runtimes applied with kubectl; the operator's
    Deployment available on the real node."""
    cluster = real_node_cluster
    cluster.kubectl("apply", "--server-side", "-k", str(stack_dir / "00-crds"))
    for crd in list_objects(
        real_node_clients.dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition"
    ):
        if crd["spec"]["group"].endswith("kubeflow.org"):
            wait_for_established(real_node_clients.dyn, crd["metadata"]["name"])
    cluster.kubectl("apply", "--server-side", "-k", str(stack_dir / "01-operator"))
    cluster.kubectl("apply", "--server-side", "-k", str(stack_dir / "03-runtimes"))
    wait_for(
        lambda: _deployment(real_node_clients),
        lambda d: (d.get("status") or {}).get("availableReplicas") == OPERATOR_REPLICAS,
        what=f"{OPERATOR_REPLICAS} available operator replicas on the real node",
        timeout=240,
        interval=1,
    )
    return stack_dir


def _deployment(clients: ClusterClients) -> dict[str, Any]:
    found = list_objects(clients.dyn, "apps/v1", "Deployment", namespace=OPERATOR_NAMESPACE)
    return found[0] if found else {}


@pytest.fixture
def node_namespace(
    real_node_clients: ClusterClients, request: pytest.FixtureRequest
) -> Iterator[str]:
    with fresh_namespace(real_node_clients.core_v1, real_node_clients.dyn, request) as name:
        yield name
