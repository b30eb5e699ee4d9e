"""Reading Argo CD's Applications in the tests that run the real Argo CD
(``cluster/argocd.py``): their sync and health, and a stack version's Application names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.dynamic import DynamicClient

from cluster.argocd import NAMESPACE
from tests.integration.kube import list_objects

APPLICATION_API = "argoproj.io/v1alpha1"


def applications(dyn: DynamicClient) -> dict[str, dict[str, Any]]:
    """Every Application in Argo CD's namespace, by name."""
    found = list_objects(dyn, APPLICATION_API, "Application", namespace=NAMESPACE)
    return {str(app["metadata"]["name"]): app for app in found}


def app_state(app: dict[str, Any]) -> tuple[str, str]:
    """(sync status, health status) of an Application; empty strings before Argo CD
    reports them."""
    status = app.get("status") or {}
    return (
        str((status.get("sync") or {}).get("status", "")),
        str((status.get("health") or {}).get("status", "")),
    )


def synced_and_healthy(names: tuple[str, ...]) -> Callable[[dict[str, dict[str, Any]]], bool]:
    """A predicate on ``applications()``: every one of ``names`` Synced and Healthy."""
    return lambda apps: all(
        name in apps and app_state(apps[name]) == ("Synced", "Healthy") for name in names
    )
