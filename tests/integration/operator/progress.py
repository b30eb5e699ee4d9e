"""The progress server's side of the integration tests: the operator as a process with
only its declared RBAC (as its Deployment would run), and what a pod sends it."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.progress import REPORTING_KINDS, token_audience
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.rbac import cluster_rules, operator_rules, progress_rules
from tests.integration.credentials import (
    create_service_account,
    request_token,
    write_token_kubeconfig,
)
from tests.integration.operator.process import OperatorProcess


@pytest.fixture
def progress_operator(
    installed_crds: list[dict[str, Any]],
    admin: KubeApi,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    """The operator as a ServiceAccount bound to exactly its declared rules, its own
    namespace (the certificate Secret's) being the test's."""
    config = OperatorConfig(namespaces=(namespace,))
    create_service_account(
        admin,
        namespace,
        "operator",
        [("operator", operator_rules(config)), ("operator-progress", progress_rules(config))],
        cluster_roles=[("operator", cluster_rules(config))],
    )
    token = request_token(admin, namespace, "operator")
    credentials = write_token_kubeconfig(kubeconfig, token, tmp_path / "operator.kubeconfig")
    process = OperatorProcess(credentials, namespace, tmp_path / "operator.log").start()
    try:
        yield process
    finally:
        process.stop()


def pod_token(
    admin: KubeApi, namespace: str, pod: dict[str, Any], job: str, kind: str = "TrainJob"
) -> str:
    """What the kubelet writes to the pod's token file: a token for the pod's
    ServiceAccount, bound to the pod, for its job's audience."""
    meta = pod["metadata"]
    return request_token(
        admin,
        namespace,
        pod["spec"].get("serviceAccountName") or "default",
        bound_to={"kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
        audiences=(token_audience(namespace, job, REPORTING_KINDS[kind]),),
        seconds=3600,
    )


def post(url: str, ca: Path, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())
