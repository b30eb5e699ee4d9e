"""The fault suite's own control plane: its tests stop it, kill operators against it and
freeze them, so they never share one with the other integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cluster.local import LocalCluster
from tests.clusters import ClusterClients, _start_cluster, fresh_namespace
from tests.integration.kube import install_crds
from tests.integration.operator.jobs import Jobs


@pytest.fixture(scope="session")
def faults_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A control plane for the fault suite alone, with the job CRDs installed."""
    yield from _start_cluster(request, tmp_path_factory, "faults")


@pytest.fixture(scope="session")
def faults(faults_cluster: LocalCluster) -> Iterator[ClusterClients]:
    clients = ClusterClients.connect(faults_cluster)
    # Trainer's too: the operator watches every kind it serves, and waits for them all.
    install_crds(clients.dyn)
    try:
        yield clients
    finally:
        clients.close()


@pytest.fixture
def faults_namespace(faults: ClusterClients, request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_namespace(faults.core_v1, faults.dyn, request) as name:
        yield name


@pytest.fixture
def jobs(faults: ClusterClients, faults_namespace: str) -> Jobs:
    return Jobs(faults.api_client, faults_namespace)
