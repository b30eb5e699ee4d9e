"""The operator with only the RBAC it declares (``controller.rbac``), and leader election
failing over when a leader dies without releasing its Lease."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi, Resource
from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.operator import Operator
from kubetrain.controller.rbac import leader_election_rules, operator_rules
from tests.integration.kube import condition
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


def _service_account_api(kubeconfig: Path, namespace: str, config: OperatorConfig) -> KubeApi:
    """A KubeApi authenticated as a ServiceAccount bound to exactly the declared rules."""
    admin = KubeApi.connect(str(kubeconfig))
    try:
        meta = {"name": "operator", "namespace": namespace}
        admin.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            resource=SERVICE_ACCOUNTS,
        )
        subject = [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}]
        for name, rules in (
            ("operator", operator_rules(config)),
            ("operator-lease", leader_election_rules()),
        ):
            role_meta = {"name": name, "namespace": namespace}
            admin.create(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": role_meta,
                    "rules": [r.to_wire() for r in rules],
                },
                resource=ROLES,
            )
            admin.create(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": role_meta,
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": name,
                    },
                    "subjects": subject,
                },
                resource=ROLE_BINDINGS,
            )
        token = admin.request(
            "POST",
            SERVICE_ACCOUNTS.path(namespace, "operator", "token"),
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )["status"]["token"]
    finally:
        admin.close()
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    configuration = client.Configuration()
    configuration.host = cluster["server"]
    if "certificate-authority" in cluster:
        configuration.ssl_ca_cert = cluster["certificate-authority"]
    else:
        ca = kubeconfig.parent / f"{namespace}-ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        configuration.ssl_ca_cert = str(ca)
    configuration.api_key = {"authorization": str(token)}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return KubeApi(configuration, qps=100, burst=200)


@pytest.fixture
def restricted_operator(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Operator]:
    config = OperatorConfig(namespaces=(namespace,), workers=2, leader_elect=True)
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    api = _service_account_api(kubeconfig, namespace, config)
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
        assert registry.get_sample_value("kubetrain_reconcile_errors_total", labels) is None


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
