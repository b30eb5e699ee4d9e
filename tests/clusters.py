"""The control planes of the suite and the fixtures that reach them (a plugin the root
conftest loads, so every test directory can use them).

Each fixture below starts its profile's control plane (``tests/profiles.py``: the recipe)
on first use, once per pytest process, and stops it at the end; ``make test`` runs each
profile's tests in a process of their own, so a control plane lives as long as its
tests. Component logs are kept and, when a test failed, their tails are printed. Each
test gets a fresh namespace. Set ``KUBETRAIN_TEST_CLUSTER_DIR`` to the work directory of
a control plane already running (``make cluster-up``: build/cluster) to use that as the
``main`` profile's.

- ``local_cluster`` (profile ``main``): clients ``api_client``, ``core_v1``, ``dyn``;
  ``namespace``; ``installed_crds``;
- ``kueue_cluster`` (``kueue``): the scheduler-plugins scheduler with Coscheduling, and
  the real Kueue once a test asks for ``kueue`` (clients in ``kueue_clients``, a
  namespace in ``kueue_namespace``). ``coscheduling_cluster`` is the same control plane
  (``coscheduling``, ``coscheduling_namespace``): gang scheduling needs only its
  scheduler, and Kueue manages only jobs that name one of its queues;
- ``metrics_cluster`` (``metrics``): the resource metrics API (metrics-server over
  kwok's emulated pod usage, ``cluster/metrics.py``) and short HPA settings;
  ``metrics_clients``, ``metrics_namespace``;
- ``real_node_cluster`` (``realnode``): one real node (``cluster/node.py``: containerd,
  the kubelet, kube-proxy and CoreDNS) beside two kwok GPU nodes and no kwok CPU node, so
  that every pod that tolerates no GPU taint runs for real; ``node_name`` is its name;
- ``argocd_cluster`` (``argocd``): the same, for Argo CD's delivery, run after the
  ``realnode`` profile's process (one real node at a time) and disposed of after it.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from cluster.kueue import Kueue
from cluster.local import ClusterError, LocalCluster, stop_orphaned_clusters
from cluster.node_config import NODE_NAME
from cluster.tools import ToolsMissingError, find_tools
from cluster.topology import default_topology
from tests.integration.kube import install_crds, list_objects, wait_for
from tests.profiles import PROFILES

#: The control planes this session started, by profile.
CLUSTERS_KEY = pytest.StashKey[dict[str, LocalCluster]]()
RSS_KEY = pytest.StashKey[dict[str, dict[str, int]]]()
TEST_NAMESPACE_LABEL = "kubetrain.dev/test"
CONTROL_PLANE_DIR = "control-plane"


def _start_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, role: str
) -> Iterator[LocalCluster]:
    """Start profile ``role``'s control plane, yield it, stop it (keeping its logs)."""
    profile = PROFILES[role]
    try:
        tools = find_tools(only=profile.tools)
    except ToolsMissingError as err:
        pytest.fail(str(err), pytrace=False)
    # A session killed before its teardown leaves its control planes running: stop those.
    sessions = tmp_path_factory.getbasetemp().parent
    stop_orphaned_clusters(sessions.glob(f"*/{CONTROL_PLANE_DIR}*"))
    suffix = "" if role == "main" else f"-{role}"
    cluster = LocalCluster(
        tmp_path_factory.mktemp(CONTROL_PLANE_DIR + suffix),
        tools=tools,
        scheduler=profile.scheduler,
        real_node=profile.real_node,
        topology=default_topology(cpu_nodes=0, gpu_nodes=2) if profile.real_node else None,
        metrics=profile.metrics,
    )
    request.config.stash.setdefault(CLUSTERS_KEY, {})[role] = cluster
    try:
        cluster.up()
    except ClusterError as err:
        cluster.down()
        pytest.fail(f"the {role} local control plane did not start: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        request.config.stash.setdefault(RSS_KEY, {})[role] = cluster.memory_rss_bytes()
        cluster.down()


@dataclass
class ClusterClients:
    """Kubernetes clients bound to one control plane's admin kubeconfig."""

    cluster: LocalCluster
    api_client: client.ApiClient
    core_v1: client.CoreV1Api
    batch_v1: client.BatchV1Api
    dyn: DynamicClient

    @classmethod
    def connect(cls, cluster: LocalCluster) -> ClusterClients:
        api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(cluster.kubeconfig)
        )
        return cls(
            cluster=cluster,
            api_client=api,
            core_v1=client.CoreV1Api(api),
            batch_v1=client.BatchV1Api(api),
            dyn=DynamicClient(api),  # type: ignore[no-untyped-call]
        )

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]

    @classmethod
    def session(cls, cluster: LocalCluster) -> Iterator[ClusterClients]:
        """Clients for a fixture's lifetime: connected, yielded, closed."""
        clients = cls.connect(cluster)
        try:
            yield clients
        finally:
            clients.close()


@contextmanager
def fresh_namespace(
    core_v1: client.CoreV1Api, dyn: DynamicClient, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A new namespace named after the test, ready for pods; deleted afterwards."""
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
    yield from _start_cluster(request, tmp_path_factory, "main")


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
    return install_crds(dyn)


@pytest.fixture
def namespace(
    core_v1: client.CoreV1Api, dyn: DynamicClient, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (its pods with it)."""
    with fresh_namespace(core_v1, dyn, request) as name:
        yield name


# A real node: pods that run (a kubelet with containerd) --------------------------------


@pytest.fixture(scope="session")
def real_node_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A control plane with one real node beside two kwok GPU nodes, started on first
    use and stopped (node included: nothing left on the host) at the end."""
    yield from _start_cluster(request, tmp_path_factory, "realnode")


@pytest.fixture(scope="session")
def real_node_clients(real_node_cluster: LocalCluster) -> Iterator[ClusterClients]:
    """Clients of the control plane with the real node."""
    yield from ClusterClients.session(real_node_cluster)


@pytest.fixture(scope="session")
def node_name(real_node_cluster: LocalCluster) -> str:
    """The real node's Node name."""
    return NODE_NAME


@pytest.fixture(scope="session")
def argocd_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """The ``argocd`` profile's control plane: a real node beside two kwok GPU nodes, as
    ``real_node_cluster``, for Argo CD's delivery alone (disposed of at the end)."""
    yield from _start_cluster(request, tmp_path_factory, "argocd")


@pytest.fixture(scope="session")
def argocd_clients(argocd_cluster: LocalCluster) -> Iterator[ClusterClients]:
    """Clients of the ``argocd`` profile's control plane."""
    yield from ClusterClients.session(argocd_cluster)


# Resource metrics: a control plane serving metrics.k8s.io, for the autoscaling tests ----


@pytest.fixture(scope="session")
def metrics_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A control plane with metrics-server over kwok's emulated usage and short HPA
    settings, started on first use, stopped at the end. Its own: the other tests'
    control plane does not run metrics-server, and its fake nodes keep their addresses."""
    yield from _start_cluster(request, tmp_path_factory, "metrics")


@pytest.fixture(scope="session")
def metrics_clients(metrics_cluster: LocalCluster) -> Iterator[ClusterClients]:
    """Clients of the metrics control plane."""
    yield from ClusterClients.session(metrics_cluster)


@pytest.fixture
def metrics_namespace(
    metrics_clients: ClusterClients, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace on the metrics control plane."""
    with fresh_namespace(metrics_clients.core_v1, metrics_clients.dyn, request) as name:
        yield name


# Kueue and gang scheduling: the coscheduling scheduler, and the real Kueue ------------


@pytest.fixture(scope="session")
def kueue_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """The ``kueue`` profile's control plane, started on first use. Its scheduler is
    scheduler-plugins' (Coscheduling): pods without a PodGroup are scheduled as
    kube-scheduler would, gangs bind whole, and one test runs gang-scheduled jobs under
    Kueue."""
    yield from _start_cluster(request, tmp_path_factory, "kueue")


@pytest.fixture(scope="session")
def coscheduling_cluster(kueue_cluster: LocalCluster) -> LocalCluster:
    """The control plane with the coscheduling scheduler (PodGroup CRD installed,
    scheduler-plugins controller running): the ``kueue`` profile's."""
    return kueue_cluster


@pytest.fixture(scope="session")
def coscheduling(coscheduling_cluster: LocalCluster) -> Iterator[ClusterClients]:
    """Clients of the coscheduling control plane."""
    yield from ClusterClients.session(coscheduling_cluster)


@pytest.fixture
def coscheduling_namespace(
    coscheduling: ClusterClients, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace on the coscheduling control plane."""
    with fresh_namespace(coscheduling.core_v1, coscheduling.dyn, request) as name:
        yield name


@pytest.fixture(scope="session")
def kueue(kueue_cluster: LocalCluster) -> Iterator[Kueue]:
    """The real Kueue (CRDs, webhooks, controller manager) against ``kueue_cluster``,
    with kubetrain's job CRDs (Kubeflow v1 and Trainer v2) installed first and Kueue's
    integrations for them: batch/job, kubeflow.org/pytorchjob, tfjob, mpijob and
    trainer.kubeflow.org/trainjob. Stopped at the end of the session."""
    # kubetrain's job CRDs first: Kueue sets a Kubeflow integration up at start when its
    # kind is served, and otherwise only once it polls again (back-off up to 2 minutes).
    # With Trainer's CRDs served, Kueue runs its TrainJob integration too.
    clients = ClusterClients.connect(kueue_cluster)
    try:
        install_crds(clients.dyn)
    finally:
        clients.close()
    running = Kueue(kueue_cluster)
    try:
        running.start()
    except ClusterError as err:
        running.stop()
        pytest.fail(f"Kueue did not start: {err}", pytrace=False)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def kueue_clients(kueue: Kueue) -> Iterator[ClusterClients]:
    """Clients of the control plane Kueue runs against."""
    clients = ClusterClients.connect(kueue.cluster)
    try:
        yield clients
    finally:
        clients.close()


@pytest.fixture
def kueue_namespace(kueue_clients: ClusterClients, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on Kueue's control plane (Kueue manages the Jobs in it)."""
    with fresh_namespace(kueue_clients.core_v1, kueue_clients.dyn, request) as name:
        yield name


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    clusters = config.stash.get(CLUSTERS_KEY, {})
    all_rss = config.stash.get(RSS_KEY, {})
    failed = terminalreporter.stats.get("failed") or terminalreporter.stats.get("error")
    for role, cluster in clusters.items():
        title = "local control plane" if role == "main" else f"local control plane ({role})"
        terminalreporter.write_sep("-", title)
        rss = all_rss.get(role, {})
        if rss:
            parts = ", ".join(f"{name} {value / 2**20:.0f}" for name, value in sorted(rss.items()))
            terminalreporter.write_line(
                f"RSS at the end of the session: {sum(rss.values()) / 2**20:.0f} MiB ({parts} MiB)"
            )
        terminalreporter.write_line(f"component logs: {cluster.saved_logs_dir}")
        if not failed:
            continue
        for path in sorted(cluster.saved_logs_dir.glob("*.log")):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            terminalreporter.write_sep("-", f"{role}: {path.name} (last 60 of {len(lines)} lines)")
            for line in lines[-60:]:
                terminalreporter.write_line(line)
