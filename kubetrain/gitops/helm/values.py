"""The Helm chart's values: what they are (defaults from the stack, ``values.schema.json``
from the typed ``OperatorConfig`` and ``TrainingOperatorProps``), what props they mean
(:func:`operator_props`, the one mapping the chart generator and the tests use); how the
generator probes them is :mod:`kubetrain.gitops.helm.dimensions`."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import typing
from enum import StrEnum
from typing import Any

from kubetrain.api.base import QUANTITY_PATTERN
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.types import (
    DNS1123_LABEL,
    TOLERATION_EFFECTS,
    TOLERATION_OPERATORS,
    Image,
    Quantity,
    Resources,
)
from kubetrain.controller.config import JOB_KINDS, OperatorConfig

#: OperatorConfig fields exposed as top-level values (camelCase), in values.yaml order.
CONFIG_VALUES = (
    "leader_elect",
    "leader_election_id",
    "log_level",
    "metrics_port",
    "gang_scheduler",
    "workers",
    "kube_api_qps",
    "kube_api_burst",
    "startup_timeout_seconds",
    "success_grace_seconds",
    "progress_timeout_seconds",
    "progress_startup_timeout_seconds",
    "event_qps",
    "progress_server",
)
#: Bounds OperatorConfig's checks enforce, stated for the schema (a unit test holds the
#: two to the same answers at and beyond every bound).
CONFIG_BOUNDS: dict[str, dict[str, float]] = {
    "workers": {"minimum": 1, "maximum": 64},
    "kube_api_qps": {"exclusiveMinimum": 0},
    "kube_api_burst": {"minimum": 1},
    "metrics_port": {"minimum": 1024, "maximum": 65535},
    "startup_timeout_seconds": {"minimum": 1},
    "success_grace_seconds": {"minimum": 0},
    "progress_timeout_seconds": {"minimum": 0},
    "progress_startup_timeout_seconds": {"minimum": 0},
    "event_qps": {"exclusiveMinimum": 0},
}
REPLICAS_BOUNDS = {"minimum": 1, "maximum": 10}
#: Probe texts: distinctive, so that where they show up the value must have gone.
PROBES: dict[str, Any] = {
    "image.repository": "probe.example/kubetrain-probe-repository",
    "image.tag": "probe-tag-q7",
    "image.digest": "sha256:" + "9f3e" * 16,
    "resources.cpu": "1234m",
    "resources.memory": "4321Mi",
    "resources.cpuLimit": "2345m",
    "resources.memoryLimit": "5432Mi",
    "leaderElectionId": "kubetrain-probe-lease",
    "metricsPort": 47813,
    "workers": 37,
    "kubeApiQps": 17.25,
    "kubeApiBurst": 4127,
    "startupTimeoutSeconds": 43219,
    "successGraceSeconds": 3917,
    "eventQps": 7.75,
}
REPLICAS_PROBE = 7
NAMESPACE_PROBES = ("kt-probe-ns-a", "kt-probe-ns-b")
NODE_SELECTOR_PROBE = {"probe.example/node-selector": "probe"}
TOLERATIONS_PROBE = [{"key": "probe.example/toleration", "operator": "Exists"}]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def attribute_docs(cls: type) -> dict[str, str]:
    """A dataclass's attribute docstrings (the string under each field), one line each."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef)).body
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def accepted_members(name: str) -> list[str]:
    """The members of an enum-typed OperatorConfig field that its checks accept."""
    enum = typing.get_type_hints(OperatorConfig)[name]
    accepted = []
    for member in enum:
        try:
            OperatorConfig(**{name: member})
        except ValueError:
            continue
        accepted.append(member.value)
    return accepted


def _split_image(image: Image) -> dict[str, str]:
    reference, _, digest = str(image).partition("@")
    repository, tag = reference, ""
    if ":" in reference.rsplit("/", 1)[-1]:
        repository, tag = reference.rsplit(":", 1)
    return {"repository": repository, "tag": tag, "digest": digest}


def default_values(props: TrainingOperatorProps, *, monitoring: bool = False) -> dict[str, Any]:
    """The values that give ``props`` back (values.yaml); ``monitoring``: whether the
    monitoring objects are on by default (the stack has monitoring)."""
    config = props.config
    resources = props.resources
    values: dict[str, Any] = {
        "image": _split_image(props.image),
        "replicas": props.replicas,
        "watchNamespaces": list(props.watch_namespaces or config.namespaces),
        "kinds": {kind: kind in config.kinds for kind in JOB_KINDS},
        "resources": {
            "cpu": str(resources.cpu or ""),
            "memory": str(resources.memory or ""),
            "cpuLimit": str(resources.cpu_limit or ""),
            "memoryLimit": str(resources.memory_limit or ""),
        },
        "nodeSelector": dict(props.node_selector),
        "tolerations": [dict(t) for t in props.tolerations],
    }
    for name in CONFIG_VALUES:
        value = getattr(config, name)
        values[camel(name)] = value.value if isinstance(value, StrEnum) else value
    values["samples"] = {"enabled": False}
    values["monitoring"] = {"enabled": monitoring}
    return values


def _quantity(text: str) -> Quantity | None:
    return Quantity(text) if text else None


def operator_props(base: TrainingOperatorProps, values: dict[str, Any]) -> TrainingOperatorProps:
    """The props ``values`` stand for: ``base`` (the stack's) with the values applied.
    Raises ValueError where the constructs refuse them."""
    image = values["image"]
    reference = image["repository"]
    reference += f":{image['tag']}" if image["tag"] else ""
    reference += f"@{image['digest']}" if image["digest"] else ""
    res = values["resources"]
    hints = typing.get_type_hints(OperatorConfig)
    changes: dict[str, Any] = {
        "kinds": tuple(kind for kind in JOB_KINDS if values["kinds"][kind]),
        "namespaces": (),
    }
    for name in CONFIG_VALUES:
        value = values[camel(name)]
        kind = hints[name]
        changes[name] = (
            kind(value) if isinstance(kind, type) and issubclass(kind, StrEnum) else value
        )
    return dataclasses.replace(
        base,
        image=Image(reference),
        replicas=values["replicas"],
        watch_namespaces=tuple(values["watchNamespaces"]),
        resources=Resources(
            cpu=_quantity(res["cpu"]),
            memory=_quantity(res["memory"]),
            cpu_limit=_quantity(res["cpuLimit"]),
            memory_limit=_quantity(res["memoryLimit"]),
        ),
        node_selector=dict(values["nodeSelector"]),
        tolerations=tuple(dict(t) for t in values["tolerations"]),
        config=dataclasses.replace(base.config, **changes),
    )


# --- values.schema.json -------------------------------------------------------------


def _type_schema(kind: Any) -> dict[str, Any]:
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        return {"type": "integer"}
    if kind is float:
        return {"type": "number"}
    if kind is str:
        return {"type": "string"}
    raise TypeError(f"no schema for {kind!r}")


def _string(pattern: str, description: str, *, optional: bool = False) -> dict[str, Any]:
    return {
        "type": "string",
        "pattern": f"^$|{pattern}" if optional else pattern,
        "description": description,
    }


def values_schema(props: TrainingOperatorProps) -> dict[str, Any]:
    """values.schema.json: types and descriptions from the typed config and props."""
    docs, prop_docs = attribute_docs(OperatorConfig), attribute_docs(TrainingOperatorProps)
    hints = typing.get_type_hints(OperatorConfig)
    config = props.effective_config()
    properties: dict[str, Any] = {
        "image": {
            "type": "object",
            "description": prop_docs["image"] + " Set a tag, a digest, or both.",
            "additionalProperties": False,
            "required": ["repository", "tag", "digest"],
            "properties": {
                "repository": _string(
                    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$",
                    "Registry and repository, e.g. ghcr.io/kubetrain/operator.",
                ),
                "tag": _string(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", "Image tag.", optional=True),
                "digest": _string(
                    r"^sha256:[a-f0-9]{64}$", "Image digest (sha256:<64 hex>).", optional=True
                ),
            },
            "anyOf": [
                {"properties": {"tag": {"minLength": 1}, "digest": {"const": ""}}},
                {"properties": {"digest": {"minLength": 1}}},
            ],
            "not": {"properties": {"tag": {"const": "latest"}, "digest": {"const": ""}}},
        },
        "replicas": {"type": "integer", **REPLICAS_BOUNDS, "description": prop_docs["replicas"]},
        "watchNamespaces": {
            "type": "array",
            "description": prop_docs["watch_namespaces"],
            "uniqueItems": True,
            "items": {
                "type": "string",
                "maxLength": 63,
                "pattern": DNS1123_LABEL.pattern,
                "not": {"enum": list(props.config.exclude_namespaces)},
            },
        },
        "kinds": {
            "type": "object",
            "description": docs["kinds"] + " Turn a kind off with false; one must stay on.",
            "additionalProperties": False,
            "required": list(JOB_KINDS),
            "properties": {kind: {"type": "boolean"} for kind in JOB_KINDS},
            "anyOf": [{"properties": {kind: {"const": True}}} for kind in JOB_KINDS],
        },
        "resources": {
            "type": "object",
            "description": prop_docs["resources"] + " An empty string leaves one out.",
            "additionalProperties": False,
            "required": ["cpu", "memory", "cpuLimit", "memoryLimit"],
            "properties": {
                "cpu": _string(QUANTITY_PATTERN, "CPU request.", optional=True),
                "memory": _string(QUANTITY_PATTERN, "Memory request.", optional=True),
                "cpuLimit": _string(QUANTITY_PATTERN, "CPU limit. Default: none.", optional=True),
                "memoryLimit": _string(
                    QUANTITY_PATTERN, "Memory limit. Default: the request.", optional=True
                ),
            },
        },
        "nodeSelector": {
            "type": "object",
            "description": prop_docs["node_selector"],
            "additionalProperties": {"type": "string", "maxLength": 63},
        },
        "tolerations": {
            "type": "array",
            "description": prop_docs["tolerations"],
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"enum": list(TOLERATION_OPERATORS)},
                    "value": {"type": "string"},
                    "effect": {"enum": list(TOLERATION_EFFECTS)},
                    "tolerationSeconds": {"type": "integer"},
                },
            },
        },
    }
    for name in CONFIG_VALUES:
        kind = hints[name]
        schema: dict[str, Any]
        if isinstance(kind, type) and issubclass(kind, StrEnum):
            schema = {"type": "string", "enum": accepted_members(name)}
        else:
            schema = {**_type_schema(kind), **CONFIG_BOUNDS.get(name, {})}
        if name == "leader_election_id":
            schema["pattern"] = DNS1123_LABEL.pattern
        if name == "metrics_port":
            schema["not"] = {"const": config.health_port}
        properties[camel(name)] = {**schema, "description": docs[name]}
    properties["samples"] = {
        "type": "object",
        "description": "The stack's sample jobs.",
        "additionalProperties": False,
        "properties": {
            "enabled": {"type": "boolean", "description": "Install the sample jobs too."}
        },
    }
    properties["monitoring"] = {
        "type": "object",
        "description": "The operator's ServiceMonitor, PrometheusRule and Grafana dashboard "
        "ConfigMap (needs the Prometheus Operator's CRDs).",
        "additionalProperties": False,
        "properties": {
            "enabled": {"type": "boolean", "description": "Install the monitoring objects."}
        },
    }
    return {
        "$schema": "https://json-schema.org/draft-07/schema#",
        "title": "kubetrain chart values",
        "type": "object",
        "additionalProperties": False,
        "required": sorted(properties),
        "properties": properties,
    }
