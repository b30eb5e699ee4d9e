"""The operator authenticates the way it does in a cluster: as a ServiceAccount, with the
credentials loaded by the official client's own loaders (a kubeconfig holding a token,
an exec plugin, the in-cluster files of a pod), including a projected token rotated on
disk. Each test runs the operator as a separate process with only its declared RBAC and
drives jobs to Succeeded; a request sent without (or with stale) credentials would be
answered 401/403 and the jobs would never start."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.rbac import (
    cluster_rules,
    leader_election_rules,
    operator_rules,
    progress_rules,
)
from tests.integration.credentials import (
    SECRETS,
    SERVICE_ACCOUNT_DIR,
    ProjectedServiceAccount,
    ca_bytes,
    create_secret,
    create_service_account,
    request_token,
    server_of,
    write_exec_kubeconfig,
    write_token_kubeconfig,
)
from tests.integration.kube import wait_for
from tests.integration.operator.jobs import Jobs, pytorch_job, run_every_kind_to_success
from tests.integration.operator.process import OperatorProcess

SERVICE_ACCOUNT = "operator"


@pytest.fixture
def service_account(installed_crds: list[dict[str, Any]], admin: KubeApi, namespace: str) -> str:
    """The operator's ServiceAccount, bound to exactly the rules the operator declares
    for a namespaced install in the test namespace (its Lease lives there too)."""
    config = OperatorConfig(namespaces=(namespace,), leader_elect=True)
    return create_service_account(
        admin,
        namespace,
        SERVICE_ACCOUNT,
        [
            ("operator", operator_rules(config)),
            ("operator-lease", leader_election_rules()),
            # The progress server's Secret lives in the operator's namespace (this one).
            ("operator-progress", progress_rules(config)),
        ],
        cluster_roles=[("operator", cluster_rules(config))],
    )


def _operator_errors(process: OperatorProcess) -> list[str]:
    """Log lines of failed API calls (a missing credential shows up as 401 or 403)."""
    found = []
    for line in process.logs().splitlines():
        if line.startswith("{") and ("HTTP 401" in line or "HTTP 403" in line):
            found.append(line)
    return found


def test_a_kubeconfig_with_a_service_account_token_runs_every_kind(
    service_account: str,
    admin: KubeApi,
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    tmp_path: Path,
) -> None:
    token = request_token(admin, namespace, SERVICE_ACCOUNT)
    config = write_token_kubeconfig(kubeconfig, token, tmp_path / "operator.kubeconfig")
    process = OperatorProcess(
        config, namespace, tmp_path / "operator.log", extra=("--leader-elect=true",)
    ).start()
    try:
        run_every_kind_to_success(jobs, "kc")
        assert _operator_errors(process) == []
    finally:
        process.stop()


def test_an_exec_credential_plugin_runs_a_job(
    service_account: str,
    admin: KubeApi,
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    tmp_path: Path,
) -> None:
    token = request_token(admin, namespace, SERVICE_ACCOUNT)
    config = write_exec_kubeconfig(kubeconfig, token, tmp_path / "exec.kubeconfig")
    process = OperatorProcess(config, namespace, tmp_path / "operator.log").start()
    try:
        jobs.create(pytorch_job("exec", workers=1))
        jobs.wait_running("exec", {"exec-master-0", "exec-worker-0"})
        jobs.exit("exec-master-0", 0)
        jobs.wait_condition("PyTorchJob", "exec", "Succeeded")
        assert _operator_errors(process) == []
    finally:
        process.stop()


def _in_pod(directory: Path) -> list[str]:
    """Run the operator where a pod has its ServiceAccount volume: a private mount
    namespace with ``directory`` bound at /var/run/secrets/kubernetes.io/serviceaccount
    (over a tmpfs /run, so nothing changes on this machine)."""
    script = (
        "mount -t tmpfs tmpfs /run && "
        f"mkdir -p {SERVICE_ACCOUNT_DIR} && "
        f"mount --bind {shlex.quote(str(directory))} {SERVICE_ACCOUNT_DIR} && "
        'exec "$@"'
    )
    return ["unshare", "--mount", "--kill-child", "sh", "-c", script, "in-pod"]


def test_in_cluster_credentials_run_every_kind_and_a_rotated_token_is_picked_up(
    service_account: str,
    admin: KubeApi,
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    tmp_path: Path,
) -> None:
    # Tokens bound to a Secret are revoked when it is deleted, as a pod's token is with
    # its pod: that makes the old token fail the moment it is rotated out.
    first = create_secret(admin, namespace, "token-1")
    first_token = request_token(admin, namespace, SERVICE_ACCOUNT, bound_to=first)
    volume = ProjectedServiceAccount(
        tmp_path / "serviceaccount",
        token=first_token,
        ca=ca_bytes(kubeconfig),
        namespace=namespace,
    )
    server = urlparse(server_of(kubeconfig))
    env = {
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port),
    }
    # No --kubeconfig, no $KUBECONFIG, no POD_NAMESPACE: the namespace file tells the
    # operator where its Lease lives, as in a pod.
    process = OperatorProcess(
        None,
        None,
        tmp_path / "operator.log",
        extra=(f"--namespace={namespace}", "--leader-elect=true"),
        wrapper=_in_pod(volume.root),
        env=env,
    )
    process.env.pop("POD_NAMESPACE", None)
    process.start()
    try:
        run_every_kind_to_success(jobs, "ic")
        assert _operator_errors(process) == []

        second = create_secret(admin, namespace, "token-2")
        volume.rotate(request_token(admin, namespace, SERVICE_ACCOUNT, bound_to=second))
        admin.delete(SECRETS, namespace, "token-1")  # the first token stops working
        _wait_until_rejected(kubeconfig, first_token, namespace, tmp_path)
        jobs.create(pytorch_job("rotated", workers=1))
        jobs.wait_running("rotated", {"rotated-master-0", "rotated-worker-0"})
        jobs.exit("rotated-master-0", 0)
        jobs.wait_condition("PyTorchJob", "rotated", "Succeeded")
        lease = admin.request(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/kubetrain-operator"
        )
        assert lease["spec"]["holderIdentity"]
    finally:
        process.stop()
    # Whatever failed with the revoked token was retried with the new one.
    reloads = [
        json.loads(line)
        for line in process.logs().splitlines()
        if line.startswith("{") and "reloaded credentials" in line
    ]
    assert reloads, "the operator never reloaded its credentials after the rotation"


def _wait_until_rejected(kubeconfig: Path, token: str, namespace: str, tmp_path: Path) -> None:
    """The API server caches token reviews for a few seconds: wait until it answers 401
    for the revoked token, so the operator cannot get by with it."""
    stale = KubeApi.connect(str(write_token_kubeconfig(kubeconfig, token, tmp_path / "old")))

    def status() -> int:
        try:
            stale.request("GET", SECRETS.path(namespace).replace("/secrets", "/pods"))
        except ApiError as err:
            return err.status
        return 200

    try:
        wait_for(status, lambda code: code == 401, what="the revoked token to be refused")
    finally:
        stale.close()
