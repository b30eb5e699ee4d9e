"""A data scientist on the local control plane: a ServiceAccount bound only to the role the
``TrainerUserAccess`` construct gives Kubeflow SDK users, its token in a kubeconfig whose
context names the test's namespace, and the SDK (``kubeflow`` 0.5.0, in its own
virtualenv) called as ``TrainerClient()`` with that ``KUBECONFIG``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubetrain.controller.kube import KubeApi
from kubetrain.manifest import parse_yaml
from tests.integration.credentials import (
    ROLE_BINDINGS,
    create_service_account,
    request_token,
    write_token_kubeconfig,
)
from tests.integration.sdk import run_sdk


def scientist_env(kubeconfig: Path, namespace: str, tmp_path: Path) -> dict[str, str]:
    """``KUBECONFIG`` of a data scientist: a ServiceAccount token, the namespace in the
    context, and only the SDK users' ClusterRole bound in that namespace."""
    admin = KubeApi.connect(str(kubeconfig))
    try:
        create_service_account(admin, namespace, "scientist")
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "scientist-trainer", "namespace": namespace},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "kubetrain-trainer-edit",
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": "scientist", "namespace": namespace}
                ],
            },
            resource=ROLE_BINDINGS,
        )
        token = request_token(admin, namespace, "scientist")
    finally:
        admin.close()
    path = write_token_kubeconfig(kubeconfig, token, tmp_path / "scientist.kubeconfig")
    config = parse_yaml(path.read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(config))
    return {"KUBECONFIG": str(path), "KUBEFLOW_SYSTEM_NAMESPACE": "kubeflow-system"}


class Sdk:
    """``tests/sdk/trainer_v2.py`` calls, as the scientist."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str) -> Any:
        return run_sdk("trainer_v2", *args, env=self.env)
