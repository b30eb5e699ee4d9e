"""Fixtures for tests against a real API server.

One local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok, see ``cluster/``) is started per test session and stopped at its end; its
component logs are kept and, when a test failed, their tails are printed. Each test gets
a fresh namespace. Set ``KUBETRAIN_TEST_CLUSTER_DIR`` to the work directory of a
control plane already running (``make cluster-up``: build/cluster) to use that instead.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from cluster.local import ClusterError, LocalCluster, stop_orphaned_clusters
from cluster.tools import ToolsMissingError, find_tools
from tests.integration.kube import apply, list_objects, wait_for, wait_for_established

CLUSTER_KEY = pytest.StashKey[LocalCluster]()
RSS_KEY = pytest.StashKey[dict[str, int]]()
TEST_NAMESPACE_LABEL = "kubetrain.dev/test"
CONTROL_PLANE_DIR = "control-plane"


@pytest.fixture(scope="session")
def local_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """The session's control plane, started on first use and stopped at the end."""
    reuse = os.environ.get("KUBETRAIN_TEST_CLUSTER_DIR")
    if reuse:
        running = LocalCluster(Path(reuse))
        if not running.is_running():
            pytest.fail(
                f"KUBETRAIN_TEST_CLUSTER_DIR={reuse} holds no running control plane: start "
                f"one with `make cluster-up KUBETRAIN_CLUSTER_DIR={reuse}` or unset it",
                pytrace=False,
            )
        yield running
        return
    try:
        tools = find_tools()
    except ToolsMissingError as err:
        pytest.fail(str(err), pytrace=False)
    # A session killed before its teardown leaves its control plane running: stop those.
    sessions = tmp_path_factory.getbasetemp().parent
    stop_orphaned_clusters(sessions.glob(f"*/{CONTROL_PLANE_DIR}*"))
    cluster = LocalCluster(tmp_path_factory.mktemp(CONTROL_PLANE_DIR), tools=tools)
    request.config.stash[CLUSTER_KEY] = cluster
    try:
        cluster.up()
    except ClusterError as err:
        cluster.down()
        pytest.fail(f"the local control plane did not start: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        request.config.stash[RSS_KEY] = cluster.memory_rss_bytes()
        cluster.down()


@pytest.fixture(scope="session")
def kubeconfig(local_cluster: LocalCluster) -> Path:
    return local_cluster.kubeconfig


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """A Kubernetes client bound to the control plane's admin kubeconfig."""
    api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig)
    )
    try:
        yield api
    finally:
        api.close()  # type: ignore[no-untyped-call]


@pytest.fixture(scope="session")
def core_v1(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def batch_v1(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture(scope="session")
def dyn(api_client: client.ApiClient) -> DynamicClient:
    """A dynamic client (server-side apply of arbitrary objects)."""
    return DynamicClient(api_client)  # type: ignore[no-untyped-call]


@pytest.fixture(scope="session")
def installed_crds(dyn: DynamicClient) -> list[dict[str, Any]]:
    """The typed API's CRDs (the Kubeflow v1 kinds and Trainer v2's), applied server-side
    and Established."""
    from kubetrain.api.crds import generate_crds
    from kubetrain.api.trainer.crds import generate_trainer_crds

    crds = [*generate_crds(), *generate_trainer_crds()]
    for crd in crds:
        apply(dyn, crd)
    for crd in crds:
        wait_for_established(dyn, crd["metadata"]["name"])
    return crds


@pytest.fixture
def namespace(
    core_v1: client.CoreV1Api, dyn: DynamicClient, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (its pods with it)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{secrets.token_hex(3)}"
    core_v1.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels={TEST_NAMESPACE_LABEL: "true"})
        )
    )
    # Pods are admitted only once the namespace's default ServiceAccount exists.
    wait_for(
        lambda: [
            sa["metadata"]["name"]
            for sa in list_objects(dyn, "v1", "ServiceAccount", namespace=name)
        ],
        lambda names: "default" in names,
        what=f"ServiceAccount default in namespace {name}",
    )
    try:
        yield name
    finally:
        try:
            core_v1.delete_namespace(name)
        except ApiException as err:
            if err.status != 404:
                raise


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    cluster = config.stash.get(CLUSTER_KEY, None)
    if cluster is None:
        return
    terminalreporter.write_sep("-", "local control plane")
    rss = config.stash.get(RSS_KEY, {})
    if rss:
        parts = ", ".join(f"{name} {value / 2**20:.0f}" for name, value in sorted(rss.items()))
        terminalreporter.write_line(
            f"RSS at the end of the session: {sum(rss.values()) / 2**20:.0f} MiB ({parts} MiB)"
        )
    terminalreporter.write_line(f"component logs: {cluster.saved_logs_dir}")
    failed = terminalreporter.stats.get("failed") or terminalreporter.stats.get("error")
    if failed:
        for path in sorted(cluster.saved_logs_dir.glob("*.log")):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            terminalreporter.write_sep("-", f"{path.name} (last 60 of {len(lines)} lines)")
            for line in lines[-60:]:
                terminalreporter.write_line(line)
