"""Reading replica specs: counts, the main container and its declared port."""

from __future__ import annotations

from typing import Any

from kubetrain.api.common import ReplicaSpec


def replicas_of(spec: ReplicaSpec | None) -> int:
    """A replica spec's replica count (1 when unset, as defaulting makes it; 0 if absent)."""
    if spec is None:
        return 0
    return 1 if spec.replicas is None else spec.replicas


def main_container(template: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The container called ``name`` in a pod template, else its first container."""
    containers: list[dict[str, Any]] = template.get("spec", {}).get("containers") or []
    if not containers:
        return None
    return next((c for c in containers if c.get("name") == name), containers[0])


def declared_port(template: dict[str, Any], container: str, port_name: str, default: int) -> int:
    """The ``containerPort`` named ``port_name`` on the main container, else ``default``."""
    main = main_container(template, container)
    for port in (main or {}).get("ports") or []:
        if port.get("name") == port_name and isinstance(port.get("containerPort"), int):
            return int(port["containerPort"])
    return default
