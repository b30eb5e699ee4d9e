"""The Trainer v2 kinds' cross-field rules, each stated twice with one message: as a CEL
rule in the CRD (the API server enforces it) and as a Python check ``kubetrain validate``
runs offline.

They are the rules upstream Kubeflow Trainer v2.3.0 checks in its CRDs' CEL and in its
admission webhooks, as far as they depend on the object alone (a webhook can also read
the referenced runtime; kubetrain has no webhook, see docs/api.md), plus the platform's
node limit: the TrainJob's (``trainjob_rules``), its update rules (``trainjob_updates``)
and the runtimes' (``runtime_rules``); this module holds the tables.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.crd_generator import ITEMS
from kubetrain.api.errors import FieldError
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.rules import Rule, Transition, run_transitions
from kubetrain.api.trainer.constants import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, TRAINJOB
from kubetrain.api.trainer.rules import node_path, nodes_message
from kubetrain.api.trainer.runtime_rules import runtime_rules
from kubetrain.api.trainer.trainjob_rules import trainjob_rules
from kubetrain.api.trainer.trainjob_updates import trainjob_transitions

# --- the tables --------------------------------------------------------------------------------


def rules_for(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> tuple[Rule, ...]:
    """Every rule of ``kind`` (TrainJob, TrainingRuntime, ClusterTrainingRuntime)."""
    rules = [*trainjob_rules(limits), *runtime_rules(limits)]
    return tuple(rule for rule in rules if kind in rule.kinds)


def transitions_for(kind: str) -> tuple[Transition, ...]:
    """The update rules of ``kind`` (runtimes have none: a runtime change applies to the
    TrainJobs created after it)."""
    return tuple(trainjob_transitions()) if kind == TRAINJOB else ()


KINDS = (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)
#: Every rule, with the default limits (a runtime rule once, though both runtimes have it).
RULES: tuple[Rule, ...] = (
    *trainjob_rules(DEFAULT_REPLICA_LIMITS),
    *runtime_rules(DEFAULT_REPLICA_LIMITS),
)
TRANSITIONS: tuple[Transition, ...] = transitions_for(TRAINJOB)


def check_trainer_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Run the Python side of every update rule of ``kind`` (``old`` is the stored object)."""
    return run_transitions(transitions_for(kind), old, new)


__all__ = [
    "ITEMS",
    "KINDS",
    "RULES",
    "TRANSITIONS",
    "Rule",
    "check_trainer_update",
    "node_path",
    "nodes_message",
    "rules_for",
    "transitions_for",
]
