"""Credentials the way a cluster hands them out, for tests that run the operator (or the
node tuner) as their own ServiceAccount: tokens from the TokenRequest API, written into a
kubeconfig, an exec plugin, or the files a pod's projected ServiceAccount volume holds.

Nothing here builds a client configuration by hand: the code under test loads these with
the official client's loaders, exactly as in a Deployment.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kubetrain.controller.kube import KubeApi, Resource
from kubetrain.controller.rbac import PolicyRule
from kubetrain.manifest import parse_yaml

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
SECRETS = Resource("", "v1", "secrets", "Secret")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
#: Where a pod's ServiceAccount token, CA and namespace are mounted.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def create_service_account(
    admin: KubeApi,
    namespace: str,
    name: str,
    roles: Sequence[tuple[str, Sequence[PolicyRule]]] = (),
    cluster_roles: Sequence[tuple[str, Sequence[PolicyRule]]] = (),
) -> str:
    """A ServiceAccount bound to a Role per ``(role name, rules)`` and to a ClusterRole
    per ``cluster_roles`` entry (named ``<namespace>-<role>``: ClusterRoles outlive the
    test's namespace); its user name."""
    admin.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        },
        resource=SERVICE_ACCOUNTS,
    )
    for role, rules in roles:
        meta = {"name": role, "namespace": namespace}
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta,
                "rules": [r.to_wire() for r in rules],
            },
            resource=ROLES,
        )
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            },
            resource=ROLE_BINDINGS,
        )
    for role, rules in cluster_roles:
        if not rules:
            continue
        cluster_meta = {"name": f"{namespace}-{role}"}
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": cluster_meta,
                "rules": [r.to_wire() for r in rules],
            },
            resource=CLUSTER_ROLES,
        )
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": cluster_meta,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": cluster_meta["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            },
            resource=CLUSTER_ROLE_BINDINGS,
        )
    return f"system:serviceaccount:{namespace}:{name}"


def request_token(
    admin: KubeApi,
    namespace: str,
    service_account: str,
    *,
    bound_to: dict[str, str] | None = None,
    seconds: int = 3600,
    audiences: tuple[str, ...] = (),
) -> str:
    """A token from the TokenRequest API (what the kubelet puts into pods). ``bound_to``
    (``{"kind": "Secret"|"Pod", "name": ..., "uid": ...}``) ties its validity to that
    object: deleting the object revokes the token. ``audiences``: whom it is for (default:
    the API server)."""
    spec: dict[str, Any] = {"expirationSeconds": seconds}
    if audiences:
        spec["audiences"] = list(audiences)
    if bound_to is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", **bound_to}
    answer = admin.request(
        "POST",
        SERVICE_ACCOUNTS.path(namespace, service_account, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    return str(answer["status"]["token"])


def create_secret(admin: KubeApi, namespace: str, name: str) -> dict[str, str]:
    """An empty Secret to bind a token to; its reference."""
    created = admin.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}},
        resource=SECRETS,
    )
    return {"kind": "Secret", "name": name, "uid": str(created["metadata"]["uid"])}


def _cluster(admin_kubeconfig: Path) -> dict[str, Any]:
    cluster: dict[str, Any] = parse_yaml(admin_kubeconfig.read_text())["clusters"][0]["cluster"]
    return cluster


def server_of(admin_kubeconfig: Path) -> str:
    return str(_cluster(admin_kubeconfig)["server"])


def ca_bytes(admin_kubeconfig: Path) -> bytes:
    """The cluster CA certificate (PEM) named by the admin kubeconfig."""
    cluster = _cluster(admin_kubeconfig)
    if "certificate-authority-data" in cluster:
        return base64.b64decode(cluster["certificate-authority-data"])
    path = Path(cluster["certificate-authority"])
    if not path.is_absolute():
        path = admin_kubeconfig.parent / path
    return path.read_bytes()


def _kubeconfig(admin_kubeconfig: Path, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": server_of(admin_kubeconfig),
                    "certificate-authority-data": base64.b64encode(
                        ca_bytes(admin_kubeconfig)
                    ).decode(),
                },
            }
        ],
        "users": [{"name": "sa", "user": user}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
        "current-context": "sa",
    }


def write_token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig whose only credential is ``users[].user.token``."""
    path.write_text(yaml.safe_dump(_kubeconfig(admin_kubeconfig, {"token": token})))
    return path


def write_exec_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig with an exec credential plugin (a script printing an ExecCredential
    holding ``token``), as cloud providers' login helpers do."""
    plugin = path.with_suffix(".plugin.py")
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(f"import json\nprint(json.dumps({json.dumps(credential)!s}))\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    path.write_text(yaml.safe_dump(_kubeconfig(admin_kubeconfig, user)))
    return path


class ProjectedServiceAccount:
    """A directory laid out as the kubelet lays out a projected ServiceAccount volume:
    ``token``, ``ca.crt`` and ``namespace`` are symlinks through ``..data`` to a
    timestamped directory, and a rotation swaps ``..data`` atomically."""

    def __init__(self, root: Path, *, token: str, ca: bytes, namespace: str) -> None:
        self.root = root
        self.ca = ca
        self.namespace = namespace
        self._generation = 0
        root.mkdir(parents=True, exist_ok=True)
        self.rotate(token)
        for name in ("token", "ca.crt", "namespace"):
            (root / name).symlink_to(f"..data/{name}")

    def rotate(self, token: str) -> None:
        """Write a new token the way the kubelet refreshes it (atomic rename)."""
        self._generation += 1
        target = self.root / f"..2026_11_23_00_00_{self._generation:02d}"
        target.mkdir()
        (target / "token").write_text(token)
        (target / "ca.crt").write_bytes(self.ca)
        (target / "namespace").write_text(self.namespace)
        staging = self.root / "..data_tmp"
        staging.unlink(missing_ok=True)
        staging.symlink_to(target.name)
        os.replace(staging, self.root / "..data")
