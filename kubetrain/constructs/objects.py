"""Turning plain Kubernetes manifests into cdk8s ``ApiObject``s without losing fields."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import cdk8s
import constructs

_CDK8S_METADATA = ("name", "namespace", "labels", "annotations")


def _metadata(obj: dict[str, Any]) -> cdk8s.ApiObjectMetadata:
    meta = obj.get("metadata", {})
    return cdk8s.ApiObjectMetadata(
        name=meta.get("name"),
        namespace=meta.get("namespace"),
        labels=meta.get("labels"),
        annotations=meta.get("annotations"),
    )


def _payload(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}


class HeldApiObject(cdk8s.ApiObject):
    """An ``ApiObject`` whose fields other than apiVersion/kind/metadata stay in Python.

    cdk8s' Python ``ApiObject`` takes no ``spec``. Sending the other fields to the jsii
    (Node.js) side as JSON patches and reading them back with ``to_json`` carried every
    object through JSON twice (a CRD is 70-250 KB of schema), which with jsii's
    per-value type checks was over a third of a ``kubetrain synth``'s CPU. Here cdk8s
    keeps the metadata (chart labels and namespaces, ``metadata.add_label`` and the like
    work as for any object) and ``to_json`` adds the rest on the Python side. Node.js
    code that serializes the object (``app.synth()``, ``chart.to_json()``) calls this
    ``to_json`` through jsii, so it writes the whole object too. JSON patches added later
    are applied over the whole object, as cdk8s applies them.
    """

    def __init__(self, scope: constructs.Construct, id: str, obj: dict[str, Any]) -> None:
        super().__init__(
            scope, id, api_version=obj["apiVersion"], kind=obj["kind"], metadata=_metadata(obj)
        )
        # A copy in JSON's types, as jsii made it: later changes to ``obj`` stay out.
        self._payload = json.dumps(_payload(obj))
        # Metadata cdk8s' props do not carry (finalizers, generateName, ...) goes the
        # payload's way.
        meta = obj.get("metadata", {})
        self._more_metadata = json.dumps(
            {k: v for k, v in meta.items() if k not in _CDK8S_METADATA}
        )
        self._patches: list[cdk8s.JsonPatch] = []

    def add_json_patch(self, *ops: cdk8s.JsonPatch) -> None:
        self._patches.extend(ops)

    def to_json(self) -> Any:
        whole = dict(super().to_json())
        whole.update(json.loads(self._payload))
        more = json.loads(self._more_metadata)
        if more:
            whole["metadata"] = {**more, **whole.get("metadata", {})}
        if self._patches:
            whole = dict(cdk8s.JsonPatch.apply(whole, *self._patches))
        return whole


def metadata(name: str, labels: Mapping[str, str], namespace: str | None) -> dict[str, Any]:
    """An object's ``metadata``: its name, a copy of ``labels`` and its namespace (None for
    a cluster-scoped object)."""
    meta: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def api_object(scope: constructs.Construct, id: str, obj: dict[str, Any]) -> cdk8s.ApiObject:
    """An ``ApiObject`` carrying a complete manifest dict (see :class:`HeldApiObject`)."""
    return HeldApiObject(scope, id, obj)


def manifests(scope: constructs.Construct) -> list[dict[str, Any]]:
    """Every ``ApiObject`` under ``scope`` as plain dicts, in tree order."""
    out: list[dict[str, Any]] = []
    for node in scope.node.find_all():
        if isinstance(node, cdk8s.ApiObject):
            out.append(dict(node.to_json()))
    return out


def chart_manifests(chart: cdk8s.Chart) -> list[dict[str, Any]]:
    """What ``chart.to_json()`` returns, in the same order (cdk8s' dependency topology of
    the chart's ``ApiObject``s), each object serialized on the Python side: the same
    list without every object's payload going to Node.js and back through a callback.
    ``chart.to_json()`` also runs construct validations and nests charts; the charts
    kubetrain renders register none and nest none (a test compares the two on every
    stack)."""
    return [
        dict(node.to_json())
        for node in cdk8s.DependencyGraph(chart.node).topology()
        if isinstance(node, cdk8s.ApiObject)
    ]


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
