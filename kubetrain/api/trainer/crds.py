"""CustomResourceDefinitions of the Trainer v2 kinds, generated from the typed models the
way the Kubeflow v1 CRDs are (``kubetrain.api.crds``): one served and stored version
(``v1alpha1``), structural schemas embedding the pinned Kubernetes types (a runtime's
replicated jobs carry the full batch JobTemplateSpec and PodTemplateSpec), CEL rules with
the messages ``kubetrain validate`` gives (``kubetrain.api.trainer.invariants``), printer
columns, and no ``status`` block or empty fields, so that apply-then-diff is empty.
TrainJob has the status subresource; the runtimes have no status.

The schemas carry upstream's defaults (the models' ``StoredDefault`` markers; the list is in
``kubetrain.api.trainer.defaults``), so stored objects read as upstream's do. Two matter
beyond reading: Kueue's TrainJob integration looks the runtime up by ``runtimeRef.apiGroup``
and ``runtimeRef.kind`` when its webhook admits the TrainJob, before any controller could
fill them in, and refuses one without them ("unsupported runtime").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import DNS1035_PATTERN, KubeModel
from kubetrain.api.crds import PART_OF_LABEL
from kubetrain.api.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    TRAINING_RUNTIME,
    TRAINJOB,
    TrainerKindInfo,
)
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.schema import model_schema
from kubetrain.api.trainer.constants import FRAMEWORK_LABEL
from kubetrain.api.trainer.invariants import ITEMS, rules_for, transitions_for
from kubetrain.api.trainer.runtime import (
    DNS1123_SUBDOMAIN_PATTERN,
    ClusterTrainingRuntime,
    TrainingRuntime,
)
from kubetrain.api.trainer.trainjob import TrainJob, TrainJobStatus

#: ``kubectl get trainjobs``: the runtime, the last condition (upstream's State: empty
#: while the job runs, since kubetrain writes no condition before the terminal one) and
#: the progress the operator writes in kubetrain's status fields.
TRAINJOB_COLUMNS = [
    {"name": "Runtime", "type": "string", "jsonPath": ".spec.runtimeRef.name"},
    {"name": "State", "type": "string", "jsonPath": ".status.state"},
    {
        "name": "Progress",
        "type": "integer",
        "jsonPath": ".status.trainerStatus.progressPercentage",
        "description": "Percent done, as the training process last reported it "
        "(the Kubeflow SDK's update_trainjob_status).",
    },
    {
        "name": "ETA",
        "type": "integer",
        "jsonPath": ".status.trainerStatus.estimatedRemainingSeconds",
        "description": "Seconds left, as the training process last estimated them.",
    },
    {
        "name": "Ready",
        "type": "integer",
        "jsonPath": ".status.readyNodes",
        "description": "Node pods Ready or Succeeded (written by kubetrain's operator).",
    },
    {
        "name": "Nodes",
        "type": "integer",
        "jsonPath": ".status.nodes",
        "description": "Node pods the TrainJob runs (written by kubetrain's operator).",
    },
    {
        "name": "Restarts",
        "type": "integer",
        "jsonPath": ".status.restarts",
        "description": "Pods recreated after a failure (written by kubetrain's operator).",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
#: ``kubectl get (cluster)trainingruntimes``: the framework label the SDK reads and the
#: default node count.
RUNTIME_COLUMNS = [
    {
        "name": "Framework",
        "type": "string",
        "jsonPath": ".metadata.labels." + FRAMEWORK_LABEL.replace(".", "\\."),
    },
    {"name": "Nodes", "type": "integer", "jsonPath": ".spec.mlPolicy.numNodes"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


@dataclass(frozen=True)
class TrainerCrdInfo:
    """A Trainer kind's model, its row of the kinds table and what its CRD shows."""

    model: type[KubeModel]
    kind: TrainerKindInfo
    columns: tuple[dict[str, str], ...]
    name_pattern: str
    name_max: int
    status: type[KubeModel] | None = None


TRAINER_CRD_INFOS: tuple[TrainerCrdInfo, ...] = (
    TrainerCrdInfo(
        TrainJob, TRAINJOB, tuple(TRAINJOB_COLUMNS), DNS1035_PATTERN, 63, TrainJobStatus
    ),
    TrainerCrdInfo(
        TrainingRuntime,
        TRAINING_RUNTIME,
        tuple(RUNTIME_COLUMNS),
        DNS1123_SUBDOMAIN_PATTERN,
        253,
    ),
    TrainerCrdInfo(
        ClusterTrainingRuntime,
        CLUSTER_TRAINING_RUNTIME,
        tuple(RUNTIME_COLUMNS),
        DNS1123_SUBDOMAIN_PATTERN,
        253,
    ),
)


def _kind(info: TrainerCrdInfo) -> str:
    return info.kind.kind


def _node(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The schema node at ``path`` (property names; ``[]`` for a list's items)."""
    node = schema
    for part in path:
        node = node["items"] if part == ITEMS else node["properties"][part]
    return node


def openapi_schema(
    info: TrainerCrdInfo, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> dict[str, Any]:
    """The root structural schema of one Trainer kind, its CEL rules in place."""
    kind = _kind(info)
    spec_model = info.model.model_fields["spec"].annotation
    assert isinstance(spec_model, type)
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
        # Copies: rules are added below, and parts of a schema may be shared.
        "spec": copy.deepcopy(model_schema(spec_model)),
    }
    if info.status is not None:
        properties["status"] = model_schema(info.status)
    root: dict[str, Any] = {
        "type": "object",
        "description": f"{kind}: {info.model.__doc__ or ''}".strip(),
        "properties": properties,
        "required": ["spec"],
    }
    for rule in rules_for(kind, limits):
        node = _node(root, rule.node)
        node.setdefault("x-kubernetes-validations", []).append(rule.cel_rule().to_schema())
    transitions = [t.cel_rule().to_schema() for t in transitions_for(kind)]
    if transitions:
        root.setdefault("x-kubernetes-validations", []).extend(transitions)
    return root


def generate_trainer_crd(
    info: TrainerCrdInfo, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> dict[str, Any]:
    """The CRD of one Trainer kind; ``limits`` bound its node counts."""
    kind = _kind(info)
    version: dict[str, Any] = {
        "name": info.kind.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(info, limits)},
        "additionalPrinterColumns": list(info.columns),
    }
    if info.status is not None:
        version["subresources"] = {"status": {}}
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


def generate_trainer_crds(limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> list[dict[str, Any]]:
    """The CRDs for TrainJob, TrainingRuntime and ClusterTrainingRuntime, in that order."""
    return [generate_trainer_crd(info, limits) for info in TRAINER_CRD_INFOS]


def trainer_crd_schema(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> dict[str, Any]:
    """The openAPIV3Schema of a Trainer ``kind`` (for validating objects in tests and tools)."""
    for info in TRAINER_CRD_INFOS:
        if _kind(info) == kind:
            return openapi_schema(info, limits)
    kinds = [_kind(i) for i in TRAINER_CRD_INFOS]
    raise KeyError(f"no Trainer CRD for kind {kind!r}: expected one of {kinds}")
