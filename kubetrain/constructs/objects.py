"""Turning plain Kubernetes manifests into cdk8s ``ApiObject``s without losing fields."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cdk8s
import constructs


def api_object(scope: constructs.Construct, id: str, obj: dict[str, Any]) -> cdk8s.ApiObject:
    """An ``ApiObject`` carrying a complete manifest dict.

    cdk8s' Python ``ApiObject`` takes no ``spec``; every top-level field other than
    apiVersion/kind/metadata is added as a JSON patch, which cdk8s applies at
    serialization, so nothing is dropped.
    """
    meta = obj.get("metadata", {})
    resource = cdk8s.ApiObject(
        scope,
        id,
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        metadata=cdk8s.ApiObjectMetadata(
            name=meta.get("name"),
            namespace=meta.get("namespace"),
            labels=meta.get("labels"),
            annotations=meta.get("annotations"),
        ),
    )
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata"):
            resource.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))
    return resource


def manifests(scope: constructs.Construct) -> list[dict[str, Any]]:
    """Every ``ApiObject`` under ``scope`` as plain dicts, in tree order."""
    out: list[dict[str, Any]] = []
    for node in scope.node.find_all():
        if isinstance(node, cdk8s.ApiObject):
            out.append(dict(node.to_json()))
    return out


@contextmanager
def construct_errors(scope: constructs.Construct, id: str) -> Iterator[None]:
    """Prefix a ValueError raised while building child ``id`` with its construct path,
    so a bad prop deep in a stack says where it is (``samples/PyTorchDdp: ...``)."""
    path = f"{scope.node.path}/{id}" if scope.node.path else id
    try:
        yield
    except ValueError as exc:
        if path in str(exc):
            raise
        raise ValueError(f"{path}: {exc}") from exc
