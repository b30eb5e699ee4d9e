"""Elastic TrainJobs (kubetrain's extension, after KEP-2903's proposed torch
``elasticPolicy``): the rules of a runtime's ``spec.mlPolicy.torch.elasticPolicy``, the rule
pairing a TrainJob with it, and the node count such a TrainJob starts with.

- A runtime: ``minNodes`` >= 1 (the schema's minimum), ``minNodes <= maxNodes``,
  ``maxNodes`` within the platform's node limit, and its ``mlPolicy.numNodes``, when set,
  within the bounds. Only the torch policy has the field: a runtime of another policy
  cannot carry it (the schema has no such field there).
- A TrainJob of an elastic runtime: its ``spec.trainer.numNodes``, when set, within the
  bounds (refused as the other pair rules are: the operator fails it with ``InvalidSpec``
  before making anything).

A TrainJob's node count, elastic or not, is decided here: :func:`start_nodes` (the
TrainJob's ``numNodes``, else the runtime's) over :func:`runtime_nodes` (a runtime's
``numNodes``, else an elastic runtime's ``minNodes``, else 1). The defaulting step writes a
runtime's ``numNodes`` from :func:`runtime_nodes` (``kubetrain.api.trainer.defaults``), so
a defaulted elastic runtime without one starts at ``minNodes`` and still passes its rules.

The update rules (``numNodes`` changes only within the bounds, and only on an elastic
TrainJob) are in ``kubetrain.api.trainer.trainjob_updates``; the torchrun environment in
``kubetrain.frameworks.pytorch``.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.rules import Rule
from kubetrain.api.trainer.rules import RUNTIMES
from kubetrain.api.trainer.runtime import MLPolicy, RuntimeBase, TorchElasticPolicy
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.api.wire import as_int, at

_POLICY = ("spec", "mlPolicy", "torch", "elasticPolicy")
_POLICY_PATH = ".".join(_POLICY)

ELASTIC_BOUNDS = "elasticPolicy.minNodes must be at most elasticPolicy.maxNodes"
ELASTIC_RUNTIME_NODES = (
    "mlPolicy.numNodes must be within torch.elasticPolicy's minNodes..maxNodes (the node count "
    "an elastic TrainJob of this runtime starts with)"
)


def elastic_limit_message(limits: ReplicaLimits) -> str:
    return (
        f"elasticPolicy.maxNodes must be at most {limits.max_replicas_per_type} (the cluster's "
        "limit on replicas of one replica type, set in the job CRDs by the platform team)"
    )


def trainjob_nodes_message(low: int, high: int, where: str) -> str:
    return (
        f"spec.trainer.numNodes must be within {low}..{high}: {where} is elastic "
        f"(mlPolicy.torch.elasticPolicy minNodes {low}, maxNodes {high})"
    )


def elastic_policy(policy: MLPolicy | None) -> TorchElasticPolicy | None:
    """The runtime's torch ``elasticPolicy``, if it has one."""
    torch = policy.torch if policy is not None else None
    return torch.elastic_policy if torch is not None else None


def _bounds(obj: dict[str, Any]) -> tuple[int | None, int | None]:
    return as_int(at(obj, *_POLICY, "minNodes")), as_int(at(obj, *_POLICY, "maxNodes"))


def _check_bounds(obj: dict[str, Any]) -> list[FieldError]:
    low, high = _bounds(obj)
    if low is not None and high is not None and low > high:
        return [FieldError(_POLICY_PATH, ELASTIC_BOUNDS, {"minNodes": low, "maxNodes": high})]
    return []


def _check_runtime_nodes(obj: dict[str, Any]) -> list[FieldError]:
    low, high = _bounds(obj)
    nodes = as_int(at(obj, "spec", "mlPolicy", "numNodes"))
    if None in (low, high, nodes):
        return []
    assert low is not None and high is not None and nodes is not None
    if low <= high and not low <= nodes <= high:  # bounds out of order: their own rule
        return [FieldError("spec.mlPolicy.numNodes", ELASTIC_RUNTIME_NODES, nodes)]
    return []


def _limit_check(limits: ReplicaLimits) -> Any:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        high = _bounds(obj)[1]
        if high is not None and high > limits.max_replicas_per_type:
            return [FieldError(f"{_POLICY_PATH}.maxNodes", elastic_limit_message(limits), high)]
        return []

    return check


def elastic_rules(limits: ReplicaLimits) -> list[Rule]:
    """The runtimes' rules on ``elasticPolicy`` (see the module docs)."""
    return [
        Rule(
            "runtime-elastic-bounds",
            RUNTIMES,
            ELASTIC_BOUNDS,
            "self.minNodes <= self.maxNodes",
            _POLICY,
            _check_bounds,
        ),
        Rule(
            "runtime-elastic-nodes-limit",
            RUNTIMES,
            elastic_limit_message(limits),
            f"self.maxNodes <= {limits.max_replicas_per_type}",
            _POLICY,
            _limit_check(limits),
            ".maxNodes",
        ),
        Rule(
            "runtime-elastic-num-nodes",
            RUNTIMES,
            ELASTIC_RUNTIME_NODES,
            "!has(self.numNodes) || !has(self.torch) || !has(self.torch.elasticPolicy) || "
            "self.torch.elasticPolicy.minNodes > self.torch.elasticPolicy.maxNodes || "
            "(self.numNodes >= self.torch.elasticPolicy.minNodes && "
            "self.numNodes <= self.torch.elasticPolicy.maxNodes)",
            ("spec", "mlPolicy"),
            _check_runtime_nodes,
            ".numNodes",
        ),
    ]


def runtime_nodes(policy: MLPolicy | None) -> int:
    """The nodes a runtime gives a TrainJob that names none: its ``numNodes``, else
    (elastic) ``minNodes``, else 1 (upstream's default)."""
    if policy is not None and policy.num_nodes is not None:
        return policy.num_nodes
    elastic = elastic_policy(policy)
    return elastic.min_nodes if elastic is not None else 1


def start_nodes(trainjob: TrainJob, policy: MLPolicy | None) -> int:
    """The nodes a TrainJob runs: its ``numNodes``, else the runtime's
    (:func:`runtime_nodes`)."""
    trainer = trainjob.spec.trainer
    if trainer is not None and trainer.num_nodes is not None:
        return trainer.num_nodes
    return runtime_nodes(policy)


def pair_errors(trainjob: TrainJob, runtime: RuntimeBase) -> list[FieldError]:
    """A TrainJob whose ``numNodes`` an elastic runtime's bounds do not allow."""
    elastic = elastic_policy(runtime.spec.ml_policy)
    trainer = trainjob.spec.trainer
    nodes = trainer.num_nodes if trainer is not None else None
    if elastic is None or nodes is None or elastic.min_nodes <= nodes <= elastic.max_nodes:
        return []
    where = f"{runtime.kind} {runtime.name}"
    message = trainjob_nodes_message(elastic.min_nodes, elastic.max_nodes, where)
    return [FieldError("spec.trainer.numNodes", message, nodes)]
