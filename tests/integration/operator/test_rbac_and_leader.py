"""The operator with only the RBAC it declares (``controller.rbac``), and leader election
failing over when a leader dies without releasing its Lease."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.operator import Operator
from kubetrain.controller.rbac import cluster_rules, leader_election_rules, operator_rules
from tests.integration.credentials import (
    create_service_account,
    request_token,
    write_token_kubeconfig,
)
from tests.integration.kube import condition
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job


def _service_account_api(
    kubeconfig: Path, namespace: str, config: OperatorConfig, tmp_path: Path
) -> KubeApi:
    """A KubeApi loaded, like the operator's in a cluster, from a kubeconfig whose only
    credential is a ServiceAccount token bound to exactly the declared rules."""
    admin = KubeApi.connect(str(kubeconfig))
    try:
        create_service_account(
            admin,
            namespace,
            "operator",
            [("operator", operator_rules(config)), ("operator-lease", leader_election_rules())],
            cluster_roles=[("operator", cluster_rules(config))],
        )
        token = request_token(admin, namespace, "operator")
    finally:
        admin.close()
    path = write_token_kubeconfig(kubeconfig, token, tmp_path / "operator.kubeconfig")
    return KubeApi.connect(str(path), qps=100, burst=200)


@pytest.fixture
def restricted_operator(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Operator]:
    config = OperatorConfig(namespaces=(namespace,), workers=2, leader_elect=True)
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    api = _service_account_api(kubeconfig, namespace, config, tmp_path)
    operator = Operator(config, api, serve_http=False)
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop,), daemon=True)
    thread.start()
    assert operator.started.wait(60), "the operator did not start with its declared RBAC"
    try:
        yield operator
    finally:
        stop.set()
        thread.join(timeout=30)
        api.close()


def test_the_declared_rbac_is_enough_to_run_every_kind(
    restricted_operator: Operator, jobs: Jobs
) -> None:
    jobs.create(pytorch_job("rbac-pt", workers=1))
    jobs.create(mpi_job("rbac-mpi", workers=1))
    jobs.wait_running("rbac-pt", {"rbac-pt-master-0", "rbac-pt-worker-0"})
    jobs.wait_condition("MPIJob", "rbac-mpi", "Running")
    jobs.exit("rbac-pt-master-0", 0)
    done = jobs.wait_condition("PyTorchJob", "rbac-pt", "Succeeded")
    assert condition(done, "Succeeded") is not None
    assert jobs.wait_event("rbac-pt", "PyTorchJobSucceeded")["source"]["component"] == (
        "kubetrain-operator"
    )
    registry = restricted_operator.metrics.registry
    for kind in ("PyTorchJob", "MPIJob"):  # not a single failed call (no 403 on the way)
        labels = {"kind": kind, "error": "temporary"}
        assert registry.get_sample_value("kubetrain_reconcile_errors_total", labels) == 0


def test_a_dead_leaders_lease_is_taken_over_after_it_expires(
    api_client: client.ApiClient, kubeconfig: Path, namespace: str
) -> None:
    api = KubeApi.connect(str(kubeconfig))

    def candidate(identity: str) -> LeaderElector:
        return LeaderElector(
            api,
            namespace=namespace,
            name="lead",
            identity=identity,
            lease_duration=2.0,
            renew_deadline=1.5,
            retry_period=0.2,
        )

    first, second = candidate("first"), candidate("second")
    stop = threading.Event()
    try:
        assert first.wait_for_leadership(stop)
        # The second candidate cannot win while the first renews...
        renewing = threading.Thread(target=first.keep_renewing, args=(stop,), daemon=True)
        renewing.start()
        gave_up = threading.Event()
        threading.Timer(3.0, gave_up.set).start()
        assert not second.wait_for_leadership(gave_up)
        # ...and wins once the first dies without releasing the Lease.
        stop.set()
        renewing.join(timeout=5)
        assert second.wait_for_leadership(threading.Event())
        lease = client.CoordinationV1Api(api_client).read_namespaced_lease("lead", namespace)
        assert lease.spec is not None
        assert lease.spec.holder_identity == "second"
        assert lease.spec.lease_transitions == 1
        assert second.is_leader and first.lost.is_set() is False
    finally:
        stop.set()
        api.close()
