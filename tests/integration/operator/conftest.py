"""Fixtures for the operator's integration tests: the operator runs in this process,
watching only the test's namespace, against the session's local control plane."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.operator import Operator
from tests.integration.operator.jobs import Jobs


class RunningOperator:
    """An operator on a background thread; ``stop()`` shuts it down gracefully."""

    def __init__(self, config: OperatorConfig, kubeconfig: Path, **options: Any) -> None:
        self.api = KubeApi.connect(
            str(kubeconfig), qps=config.kube_api_qps, burst=config.kube_api_burst
        )
        self.operator = Operator(config, self.api, serve_http=False, **options)
        self._stop = threading.Event()
        self.exit_code: int | None = None
        self._thread = threading.Thread(target=self._run, name="operator", daemon=True)

    def _run(self) -> None:
        self.exit_code = self.operator.run(self._stop)

    def start(self) -> RunningOperator:
        self._thread.start()
        if not self.operator.started.wait(60):
            raise AssertionError("the operator did not start within 60s")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.api.close()
        assert not self._thread.is_alive(), "the operator did not stop within 30s"


@pytest.fixture
def operator_config(namespace: str) -> OperatorConfig:
    """The in-process operator's configuration (override in a test module if needed)."""
    return OperatorConfig(namespaces=(namespace,), workers=2, kube_api_qps=100, kube_api_burst=200)


@pytest.fixture
def operator(
    installed_crds: list[dict[str, Any]], kubeconfig: Path, operator_config: OperatorConfig
) -> Iterator[RunningOperator]:
    running = RunningOperator(operator_config, kubeconfig).start()
    try:
        yield running
    finally:
        running.stop()


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
