"""Validate synthesized manifests: built-in kinds against the pinned Kubernetes OpenAPI,
kubeflow.org and trainer.kubeflow.org custom resources against kubetrain's generated CRD
schemas, kueue.x-k8s.io objects against the CRDs of the pinned Kueue module and
monitoring.coreos.com objects against the pinned Prometheus Operator's (both from the Go
module cache: downloaded, not built; ``make test-unit`` fetches them). Unknown fields are
errors (like kubectl's strict field validation), so a typo in a construct fails. CEL
rules are the API server's to check (the integration tests apply the objects)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator

from kubetrain.api import crd_schema
from kubetrain.api.k8s_openapi import object_schema, strict_schema
from kubetrain.api.trainer import trainer_crd_schema


@cache
def _validator(api_version: str, kind: str) -> Draft7Validator:
    if api_version.startswith(("kubeflow.org/", "trainer.kubeflow.org/")):
        generated = (
            trainer_crd_schema(kind) if api_version.startswith("trainer.") else crd_schema(kind)
        )
        schema = strict_schema(generated)
        # The API server owns root metadata; the CRD schema only constrains its name.
        schema["properties"]["metadata"].pop("additionalProperties", None)
        return Draft7Validator(schema)
    if api_version.startswith("kueue.x-k8s.io/"):
        return Draft7Validator(strict_schema(kueue_crd_schema(api_version, kind)))
    if api_version.startswith("monitoring.coreos.com/"):
        from cluster.tools import prometheus_operator_crds

        schema = crd_file_schema(prometheus_operator_crds(), api_version, kind)
        return Draft7Validator(strict_schema(schema))
    return Draft7Validator(strict_schema(object_schema(api_version, kind)))


@cache
def kueue_crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of a Kueue kind at one of its versions, from the CRD files of
    the pinned Kueue module."""
    from cluster.tools import kueue_module_crds

    return crd_file_schema(kueue_module_crds(), api_version, kind)


def crd_file_schema(paths: list[Path], api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``kind`` at the version of ``api_version``, from the CRD
    files ``paths`` (named ``<group>_<plural>.yaml``)."""
    version = api_version.split("/", 1)[1]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the Workload CRD is large
    for path in paths:
        if not path.name.split("_", 1)[-1].startswith(kind.lower()):
            continue
        crd = yaml.load(path.read_text(), Loader=loader)
        if crd["spec"]["names"]["kind"] != kind:
            continue
        for served in crd["spec"]["versions"]:
            if served["name"] == version:
                schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
                return schema
        raise KeyError(f"the {kind} CRD ({path.name}) serves no version {version}")
    raise KeyError(f"{api_version} {kind} is in none of {', '.join(p.name for p in paths)}")


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
    trainer = str(obj.get("apiVersion", "")).startswith("trainer.")
    schema = trainer_crd_schema(kind) if trainer else crd_schema(kind)
    defaulted: dict[str, Any] = server_defaulted(obj, schema)
    return defaulted
