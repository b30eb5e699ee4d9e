"""Validate synthesized manifests: built-in kinds against the pinned Kubernetes OpenAPI,
kubeflow.org and trainer.kubeflow.org custom resources against kubetrain's generated CRD
schemas. Unknown fields
are errors (like kubectl's strict field validation), so a typo in a construct fails."""

from __future__ import annotations

from functools import cache
from typing import Any

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
    return Draft7Validator(strict_schema(object_schema(api_version, kind)))


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
