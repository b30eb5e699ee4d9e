"""CustomResourceDefinitions generated from the typed models.

Each CRD is ``apiextensions.k8s.io/v1`` with one served and stored version, a structural
schema (full PodTemplateSpec of the pinned Kubernetes release, descriptions trimmed), the
status subresource, printer columns, CEL rules for the invariants upstream only checks in
webhooks (and the platform's replica limits, ``ReplicaLimits``), a CEL transition rule
keeping ``runPolicy.managedBy`` immutable, the defaults upstream stores wherever a schema
can state them (``kubetrain.api.defaults`` lists them), and no ``status`` block or empty
fields, so apply-then-diff is empty.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import DNS1035_PATTERN
from kubetrain.api.common import JobBase, JobStatus
from kubetrain.api.invariants import invariants_for, transitions_for
from kubetrain.api.kinds import MPI, PYTORCH, TENSORFLOW, KindInfo
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.mpi import MPIJob
from kubetrain.api.pytorch import PyTorchJob
from kubetrain.api.rules import REPLICA, REPLICA_FIELDS, ROOT
from kubetrain.api.schema import model_schema
from kubetrain.api.tensorflow import TFJob

# Argo CD and client-side apply keep the last-applied copy in an annotation capped at
# 256 KiB; every CRD must serialize below it.
MAX_CRD_BYTES = 256 * 1024
PART_OF_LABEL = {"app.kubernetes.io/part-of": "kubetrain"}


@dataclass(frozen=True)
class CrdInfo:
    """A kind's model and its row of the kinds table."""

    model: type[JobBase]
    kind: KindInfo

    @property
    def plural(self) -> str:
        return self.kind.plural

    @property
    def singular(self) -> str:
        return self.kind.singular

    @property
    def version(self) -> str:
        return self.kind.version

    @property
    def scale_replica_type(self) -> str | None:
        return self.kind.scale_replica_type


CRD_INFOS: tuple[CrdInfo, ...] = (
    CrdInfo(PyTorchJob, PYTORCH),
    CrdInfo(TFJob, TENSORFLOW),
    CrdInfo(MPIJob, MPI),
)

PRINTER_COLUMNS = [
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _kind(info: CrdInfo) -> str:
    return info.kind.kind


def uniform_restart_policy(kind: KindInfo) -> str | None:
    """The restart policy every replica type of ``kind`` defaults to, if they share one."""
    policies = {policy for _, policy in kind.default_restart_policies}
    return policies.pop() if len(policies) == 1 else None


def openapi_schema(info: CrdInfo, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> dict[str, Any]:
    """The root structural schema of one kind, enforcing ``limits``."""
    kind = _kind(info)
    spec_model = info.model.model_fields["spec"].annotation
    assert isinstance(spec_model, type)
    rules = invariants_for(kind, limits)
    spec = model_schema(spec_model)
    replica_spec = spec["properties"][REPLICA_FIELDS[kind]]["additionalProperties"]
    replica_spec["x-kubernetes-validations"] = [
        i.cel_rule().to_schema() for i in rules if i.scope == REPLICA
    ]
    restart_policy = uniform_restart_policy(info.kind)
    if restart_policy is not None:
        # One schema holds every replica type: the default is stored only where the kind
        # gives them all the same one (an MPIJob's Launcher and Worker differ).
        properties = replica_spec["properties"]
        properties["restartPolicy"] = {**properties["restartPolicy"], "default": restart_policy}
    return {
        "type": "object",
        "description": f"{kind}: {info.model.__doc__ or ''}".strip(),
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 63, "pattern": DNS1035_PATTERN},
                },
            },
            "spec": spec,
            "status": model_schema(JobStatus),
        },
        "required": ["spec"],
        "x-kubernetes-validations": [
            *(i.cel_rule().to_schema() for i in rules if i.scope == ROOT),
            *(t.cel_rule().to_schema() for t in transitions_for(kind)),
        ],
    }


def generate_crd(info: CrdInfo, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> dict[str, Any]:
    """The CRD of one kind; ``limits`` are the replica limits its CEL rules enforce."""
    kind = _kind(info)
    subresources: dict[str, Any] = {"status": {}}
    if info.scale_replica_type:
        rtype = info.scale_replica_type
        field = info.model.model_fields["spec"].annotation
        assert isinstance(field, type)
        specs = next(
            (f.alias or n) for n, f in field.model_fields.items() if n.endswith("replica_specs")
        )
        subresources["scale"] = {
            "specReplicasPath": f".spec.{specs}.{rtype}.replicas",
            "statusReplicasPath": f".status.replicaStatuses.{rtype}.active",
            "labelSelectorPath": f".status.replicaStatuses.{rtype}.selector",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.kind.crd_name, "labels": dict(PART_OF_LABEL)},
        "spec": {
            "group": info.kind.group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": info.plural,
                "singular": info.singular,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": info.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema(info, limits)},
                    "subresources": subresources,
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


def generate_crds(limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> list[dict[str, Any]]:
    """The CRDs for PyTorchJob, TFJob and MPIJob, in a stable order."""
    return [generate_crd(info, limits) for info in CRD_INFOS]


def crd_schema(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> dict[str, Any]:
    """The openAPIV3Schema of ``kind`` (for validating custom resources in tests and tools)."""
    for info in CRD_INFOS:
        if _kind(info) == kind:
            return openapi_schema(info, limits)
    raise KeyError(f"no CRD for kind {kind!r}: expected one of {[_kind(i) for i in CRD_INFOS]}")


def serialized_size(crd: dict[str, Any]) -> int:
    """Bytes of the compact JSON form (what kubectl stores in last-applied-configuration)."""
    return len(json.dumps(crd, separators=(",", ":")).encode())
