"""How a CRD is generated from a typed model, for both groups (Kubeflow v1's job kinds and
Trainer v2's): the ``apiextensions.k8s.io/v1`` envelope with one served and stored version,
the structural root schema (``metadata.name`` bounded, ``spec`` from the model, ``status``
where the kind has one), the CEL rules placed on the schema nodes they judge, the update
rules at the root, printer columns, the status and scale subresources, and the size bound
every CRD must stay under. What differs between kinds is data in a :class:`CrdInfo`; the
kinds' rows are in ``kubetrain.api.crds`` (v1) and ``kubetrain.api.trainer.crds``.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import DNS1035_PATTERN, CelRule, KubeModel
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.schema import model_schema

# Argo CD and client-side apply keep the last-applied copy in an annotation capped at
# 256 KiB; every CRD must serialize below it.
MAX_CRD_BYTES = 256 * 1024
PART_OF_LABEL = {"app.kubernetes.io/part-of": "kubetrain"}

#: In a rule's node path: the items of a list, and the values of a map.
ITEMS = "[]"
VALUES = "{}"

#: A schema node (property names from the root, ``ITEMS``, ``VALUES``) and a CEL rule on it.
PlacedRule = tuple[tuple[str, ...], CelRule]


def _no_transitions() -> tuple[CelRule, ...]:
    return ()


@dataclass(frozen=True, eq=False)
class CrdInfo:
    """What one kind's CRD is made of: its model, its row of the kinds table, its printer
    columns, its CEL rules (``rules(limits)``, each placed on a schema node) and update
    rules (at the root), its status model (None: no status, no status subresource), its
    name rule, the replica type behind the scale subresource, and ``shape``, a last touch
    on the root schema for what a kind stores that no rule says."""

    model: type[KubeModel]
    kind: KindInfo
    columns: tuple[dict[str, str | int], ...]
    rules: Callable[[ReplicaLimits], Iterable[PlacedRule]]
    transitions: Callable[[], Iterable[CelRule]] = _no_transitions
    status: type[KubeModel] | None = None
    name_pattern: str = DNS1035_PATTERN
    name_max: int = 63
    scale_replica_type: str | None = None
    shape: Callable[[dict[str, Any]], None] | None = None
    #: The scale subresource's paths, for a kind whose scale is not a replica type's
    #: (TrainJob: its node count).
    scale: tuple[tuple[str, str], ...] = ()


def find_info(infos: Iterable[CrdInfo], kind: str) -> CrdInfo:
    """The row of ``kind`` among ``infos``; KeyError naming the kinds they have."""
    rows = {info.kind.kind: info for info in infos}
    try:
        return rows[kind]
    except KeyError:
        raise KeyError(f"no CRD for kind {kind!r}: expected one of {list(rows)}") from None


def node_at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The schema node at ``path`` (property names; ``ITEMS``, ``VALUES``)."""
    node = schema
    for part in path:
        if part == ITEMS:
            node = node["items"]
        elif part == VALUES:
            node = node["additionalProperties"]
        else:
            node = node["properties"][part]
    return node


def spec_model(info: CrdInfo) -> type[KubeModel]:
    """The model of the kind's ``spec``."""
    model = info.model.model_fields["spec"].annotation
    assert isinstance(model, type)
    return model


def openapi_schema(info: CrdInfo, limits: ReplicaLimits) -> dict[str, Any]:
    """The root structural schema of one kind, its CEL rules in place: a new copy on every
    call, the caller's to change (made once per kind and limits, kept as JSON: reading the
    nine kinds back takes a sixth of the time making them did, and a synth asks for each)."""
    return json.loads(_schema_json(info, limits))  # type: ignore[no-any-return]


@functools.cache
def _schema_json(info: CrdInfo, limits: ReplicaLimits) -> str:
    return json.dumps(_make_schema(info, limits))


def _make_schema(info: CrdInfo, limits: ReplicaLimits) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "maxLength": info.name_max,
                    "pattern": info.name_pattern,
                },
            },
        },
        # A copy: rules are added below, and parts of a schema may be shared.
        "spec": copy.deepcopy(model_schema(spec_model(info))),
    }
    if info.status is not None:
        properties["status"] = model_schema(info.status)
    root: dict[str, Any] = {
        "type": "object",
        "description": f"{info.kind.kind}: {info.model.__doc__ or ''}".strip(),
        "properties": properties,
        "required": ["spec"],
    }
    for path, rule in info.rules(limits):
        node_at(root, path).setdefault("x-kubernetes-validations", []).append(rule.to_schema())
    transitions = [t.to_schema() for t in info.transitions()]
    if transitions:
        root.setdefault("x-kubernetes-validations", []).extend(transitions)
    if info.shape is not None:
        info.shape(root)
    return root


def _subresources(info: CrdInfo) -> dict[str, Any]:
    subresources: dict[str, Any] = {}
    if info.status is not None:
        subresources["status"] = {}
    rtype = info.scale_replica_type
    if rtype:
        specs = next(
            (f.alias or n)
            for n, f in spec_model(info).model_fields.items()
            if n.endswith("replica_specs")
        )
        subresources["scale"] = {
            "specReplicasPath": f".spec.{specs}.{rtype}.replicas",
            "statusReplicasPath": f".status.replicaStatuses.{rtype}.active",
            "labelSelectorPath": f".status.replicaStatuses.{rtype}.selector",
        }
    if info.scale:
        subresources["scale"] = dict(info.scale)
    return subresources


def generate_crd(info: CrdInfo, limits: ReplicaLimits) -> dict[str, Any]:
    """The CRD of one kind; ``limits`` are the replica limits its CEL rules enforce."""
    kind = info.kind.kind
    version: dict[str, Any] = {
        "name": info.kind.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(info, limits)},
        "additionalPrinterColumns": list(info.columns),
    }
    subresources = _subresources(info)
    if subresources:
        version["subresources"] = subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.kind.crd_name, "labels": dict(PART_OF_LABEL)},
        "spec": {
            "group": info.kind.group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": info.kind.plural,
                "singular": info.kind.singular,
            },
            "scope": "Namespaced" if info.kind.namespaced else "Cluster",
            "versions": [version],
        },
    }


def serialized_size(crd: dict[str, Any]) -> int:
    """Bytes of the compact JSON form (what kubectl stores in last-applied-configuration)."""
    return len(json.dumps(crd, separators=(",", ":")).encode())
