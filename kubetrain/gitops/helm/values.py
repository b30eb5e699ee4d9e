"""The Helm chart's values: what they are (defaults from the stack, ``values.schema.json``
from the typed ``OperatorConfig`` and ``TrainingOperatorProps``), what props they mean
(:func:`operator_props`, the one mapping the chart generator and the tests use), and how
the generator probes them (:func:`dimensions`)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import re
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
from kubetrain.gitops.helm.probes import EachProbe, Probe, ScalarProbe, WholeProbe
from kubetrain.gitops.helm.template import Axis, Option

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


# --- how the generator probes the values -------------------------------------------------


def _switch(path: str) -> Axis:
    """A boolean value: off, or on."""
    return Axis(path, (Option({path: False}, f"not $.Values.{path}"), Option({path: True}, None)))


def _presence(path: str, probe: Any, empty: Any) -> Axis:
    return Axis(path, (Option({path: probe}, f"$.Values.{path}"), Option({path: empty}, None)))


def dimensions() -> tuple[dict[str, Any], list[tuple[str, list[Axis]]], list[Probe]]:
    """The probe values, the groups of axes and the probes of the chart's operator."""
    kinds = [
        Axis(
            k,
            (
                Option({f"kinds.{k}": True}, f"$.Values.kinds.{k}"),
                Option({f"kinds.{k}": False}, None),
            ),
        )
        for k in JOB_KINDS
    ]
    # Kinds, namespaces, the gang scheduler and the progress server add and drop the same
    # RBAC rules and objects (the ClusterRole is there when any of them needs it), so they
    # are one group, rendered in every combination. Replicas and leader election touch
    # only the leader-election Role and its flag: a group of their own (the merge raises
    # if a change ever makes them meet), which keeps the renders at 2^kinds x 12 + 4.
    rbac = [
        *kinds,
        Axis(
            "watchNamespaces",
            (
                Option({"watchNamespaces": list(NAMESPACE_PROBES)}, "$.Values.watchNamespaces"),
                Option({"watchNamespaces": []}, None),
            ),
        ),
        Axis(
            "gangScheduler",
            tuple(
                Option({"gangScheduler": m}, f'eq $.Values.gangScheduler "{m}"')
                for m in accepted_members("gang_scheduler")
            ),
        ),
        _switch("progressServer"),
    ]
    leader = [
        Axis(
            "replicas",
            (
                Option({"replicas": 1}, "le (int $.Values.replicas) 1"),
                Option({"replicas": REPLICAS_PROBE}, None),
            ),
        ),
        _switch("leaderElect"),
    ]
    levels = typing.get_type_hints(OperatorConfig)["log_level"]
    groups: list[tuple[str, list[Axis]]] = [
        ("kinds, watchNamespaces, gangScheduler, progressServer", rbac),
        ("replicas, leaderElect", leader),
        (
            "image",
            [
                _presence("image.tag", PROBES["image.tag"], ""),
                Axis(
                    "image.digest",
                    (
                        Option({"image.digest": ""}, "not $.Values.image.digest"),
                        Option({"image.digest": PROBES["image.digest"]}, None),
                    ),
                ),
            ],
        ),
        (
            "resources",
            [
                _presence(f"resources.{n}", PROBES[f"resources.{n}"], "")
                for n in ("cpu", "memory", "cpuLimit", "memoryLimit")
            ],
        ),
        ("nodeSelector", [_presence("nodeSelector", NODE_SELECTOR_PROBE, {})]),
        ("tolerations", [_presence("tolerations", TOLERATIONS_PROBE, [])]),
        (
            "logLevel",
            [
                Axis(
                    "logLevel",
                    tuple(
                        Option({"logLevel": m.value}, f'eq $.Values.logLevel "{m.value}"')
                        for m in levels
                    ),
                )
            ],
        ),
    ]
    hints = typing.get_type_hints(OperatorConfig)
    kind_of = {camel(n): {int: "int", float: "float"}.get(hints[n], "str") for n in CONFIG_VALUES}
    probes: list[Probe] = [
        EachProbe(NAMESPACE_PROBES, "$.Values.watchNamespaces", "$ns"),
        WholeProbe(NODE_SELECTOR_PROBE, "$.Values.nodeSelector"),
        WholeProbe(TOLERATIONS_PROBE, "$.Values.tolerations"),
        ScalarProbe(str(REPLICAS_PROBE), "$.Values.replicas", "int"),
    ]
    probe_values: dict[str, Any] = {}
    for path, value in PROBES.items():
        probes.append(ScalarProbe(str(value), f"$.Values.{path}", kind_of.get(path, "str")))
        probe_values[path] = value
    return probe_values, groups, probes


def check_probes_distinct() -> None:
    """Probe texts must not contain one another (a substitution would be ambiguous)."""
    texts = [str(v) for v in PROBES.values()] + list(NAMESPACE_PROBES)
    for a in texts:
        for b in texts:
            if a != b and re.search(re.escape(a), b):
                raise ValueError(f"probe {a!r} is part of probe {b!r}")
