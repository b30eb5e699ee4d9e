"""Validate synthesized manifests: built-in kinds against the pinned Kubernetes OpenAPI,
kubeflow.org and trainer.kubeflow.org custom resources against kubetrain's generated CRD
schemas, kueue.x-k8s.io objects against the CRDs of the pinned Kueue module and
monitoring.coreos.com objects against the pinned Prometheus Operator's. The three pinned
sources are read from the committed schema bundle (``tests/schema_bundle.py``), so the
unit tier needs no download. Unknown fields are errors (like kubectl's strict field
validation), so a typo in a construct fails. CEL rules are the API server's to check (the
integration tests apply the objects)."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from jsonschema import Draft7Validator

from kubetrain.api import crd_schema
from kubetrain.api.k8s_openapi import strict_schema, structural_schema
from tests import schema_bundle


@cache
def _validator(api_version: str, kind: str) -> Draft7Validator:
    if api_version.startswith(("kubeflow.org/", "trainer.kubeflow.org/")):
        schema = strict_schema(crd_schema(kind))
        # The API server owns root metadata; the CRD schema only constrains its name.
        schema["properties"]["metadata"].pop("additionalProperties", None)
        return Draft7Validator(schema)
    if api_version.startswith("kueue.x-k8s.io/"):
        return Draft7Validator(strict_schema(kueue_crd_schema(api_version, kind)))
    if api_version.startswith("monitoring.coreos.com/"):
        bundle = _bundle("prometheus-operator")
        return Draft7Validator(
            strict_schema(schema_bundle.lookup(bundle, "schemas", api_version, kind))
        )
    return Draft7Validator(strict_schema(builtin_schema(api_version, kind)))


@cache
def _bundle(source: str) -> dict[str, Any]:
    return schema_bundle.load(source)


def builtin_schema(api_version: str, kind: str) -> dict[str, Any]:
    """Structural schema of a built-in kind of the pinned Kubernetes release."""
    bundle = _bundle("kubernetes")
    name = schema_bundle.lookup(bundle, "kinds", api_version, kind)
    return structural_schema(bundle["definitions"], name)


def kueue_crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of a Kueue kind at one of its versions, as the pinned Kueue
    module's CRD files give it."""
    schema: dict[str, Any] = schema_bundle.lookup(_bundle("kueue"), "schemas", api_version, kind)
    return schema


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Every schema violation of ``obj`` as '<path>: <message>'."""
    validator = _validator(obj["apiVersion"], obj["kind"])
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def assert_valid(objs: list[dict[str, Any]]) -> None:
    problems = {f"{o['kind']}/{o.get('metadata', {}).get('name')}": schema_errors(o) for o in objs}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, f"schema violations: {problems}"


def server_defaulted(value: Any, schema: dict[str, Any]) -> Any:
    """A copy of ``value`` as the API server's structural defaulting leaves it: a property's
    ``default`` is set where its object exists and the property is absent, recursively
    (through lists' items and maps' values); objects are never created to hold one."""
    value = copy.deepcopy(value)
    pending = [(value, schema)]
    while pending:
        node, node_schema = pending.pop()
        if isinstance(node, dict):
            for key, child_schema in (node_schema.get("properties") or {}).items():
                if key not in node and "default" in child_schema:
                    node[key] = copy.deepcopy(child_schema["default"])
                if key in node:
                    pending.append((node[key], child_schema))
            extra = node_schema.get("additionalProperties")
            if isinstance(extra, dict):
                pending.extend((child, extra) for child in node.values())
        elif isinstance(node, list) and isinstance(node_schema.get("items"), dict):
            pending.extend((item, node_schema["items"]) for item in node)
    return value


def stored_as_server_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (any kind kubetrain serves) with the defaults its CRD makes the server store."""
    kind = obj["kind"]
    schema = crd_schema(kind)
    defaulted: dict[str, Any] = server_defaulted(obj, schema)
    return defaulted
