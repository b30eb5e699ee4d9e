"""CustomResourceDefinitions generated from the typed models: every kind of both groups,
Kubeflow v1's (every kind of ``kubetrain.api.kinds.V1_KINDS``; their rows are in
``kubetrain.api.job_crds``) and Trainer v2's (TrainJob, TrainingRuntime,
ClusterTrainingRuntime; in ``kubetrain.api.trainer.crds``), through one generator
(``kubetrain.api.crd_generator``).

Each CRD is ``apiextensions.k8s.io/v1`` with one served and stored version, a structural
schema (the pinned Kubernetes types embedded, descriptions trimmed), printer columns, CEL
rules for the invariants upstream only checks in webhooks (and the platform's replica
limits, ``ReplicaLimits``), CEL transition rules, the defaults upstream stores wherever a
schema can state them (``kubetrain.api.defaults`` and ``kubetrain.api.trainer.defaults``
list them), and no ``status`` block or empty fields, so apply-then-diff is empty.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.crd_generator import (
    MAX_CRD_BYTES,
    PART_OF_LABEL,
    CrdInfo,
    find_info,
    generate_crd,
    openapi_schema,
    serialized_size,
)
from kubetrain.api.job_crds import JOB_CRD_INFOS
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.trainer.crds import TRAINER_CRD_INFOS

#: Every kind's row: the v1 job kinds, then Trainer's.
CRD_INFOS: tuple[CrdInfo, ...] = (*JOB_CRD_INFOS, *TRAINER_CRD_INFOS)


def crd_info(kind: str) -> CrdInfo:
    """The row of ``kind``; KeyError naming the kinds that have a CRD."""
    return find_info(CRD_INFOS, kind)


def all_crds(limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> list[dict[str, Any]]:
    """Every CRD kubetrain serves, in a stable order: the v1 job kinds (the kinds table's
    order), TrainJob, TrainingRuntime, ClusterTrainingRuntime; ``limits`` bound replica and
    node counts."""
    return [generate_crd(info, limits) for info in CRD_INFOS]


def crd_for(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> dict[str, Any]:
    """The CRD of one kind (of either group)."""
    return generate_crd(crd_info(kind), limits)


def crd_schema(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> dict[str, Any]:
    """The openAPIV3Schema of ``kind`` (for validating custom resources in tests and tools)."""
    return openapi_schema(crd_info(kind), limits)


__all__ = [
    "CRD_INFOS",
    "MAX_CRD_BYTES",
    "PART_OF_LABEL",
    "CrdInfo",
    "all_crds",
    "crd_for",
    "crd_info",
    "crd_schema",
    "serialized_size",
]
