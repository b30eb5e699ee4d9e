"""Fixtures for the operator's integration tests: the operator runs in this process
against the session's local control plane.

One operator serves every test that asks for ``operator``, as upstream suites run one
manager (kueue's and jobset's integration frameworks): it watches every namespace (each
test has its own) and keeps running from one such test to the next. A test that does not
ask for it runs without it: the shared operator is stopped first (``_operator_exclusive``)
and started again by the next test that asks, so a test that runs its own operator
(``operator_config``, ``RunningOperator``), or checks what happens with none, never has a
second one beside it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi
from tests.integration.operator.jobs import Jobs
from tests.integration.operator.progress import progress_operator
from tests.integration.operator.running import SHARED_KEY, RunningOperator, SharedOperator

__all__ = ["RunningOperator", "progress_operator"]


@pytest.fixture(scope="session")
def shared_operator(
    installed_crds: list[dict[str, Any]], kubeconfig: Path, request: pytest.FixtureRequest
) -> Iterator[SharedOperator]:
    shared = SharedOperator(kubeconfig)
    request.session.stash[SHARED_KEY] = shared
    try:
        yield shared
    finally:
        shared.pause()


@pytest.fixture
def operator(
    shared_operator: SharedOperator,
) -> RunningOperator:
    """The shared operator, running (``SharedOperator``); a test may stop it, the next
    one gets a new one."""
    return shared_operator.get()


@pytest.fixture
def operator_config(namespace: str) -> OperatorConfig:
    """The configuration of an operator a test starts itself, watching its namespace."""
    return OperatorConfig(namespaces=(namespace,), workers=2, kube_api_qps=100, kube_api_burst=200)


@pytest.fixture
def admin(kubeconfig: Path) -> Iterator[KubeApi]:
    """The API as the cluster's admin (kubetrain's own client)."""
    api = KubeApi.connect(str(kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def jobs(api_client: client.ApiClient, namespace: str) -> Jobs:
    return Jobs(api_client, namespace)
