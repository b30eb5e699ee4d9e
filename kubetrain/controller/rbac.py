"""The RBAC rules the operator needs, derived from its configuration.

The operator is the one place that knows which API calls it makes, so it states its own
rules; the ``TrainingOperator`` construct renders them into a ClusterRole (cluster-wide)
or one Role per watched namespace. Least privilege: explicit verbs and resources, no
wildcards, no ``pods/exec`` (MPI launchers reach workers over SSH).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain.controller.config import OperatorConfig

_PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs"}
_READ = ("get", "list", "watch")
_CHILD = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class PolicyRule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def to_wire(self) -> dict[str, list[str]]:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }


def operator_rules(config: OperatorConfig) -> list[PolicyRule]:
    """Rules for the job namespaces (a ClusterRole, or a Role in each watched namespace)."""
    kinds = [_PLURALS[k] for k in config.kinds]
    rules = [
        PolicyRule(
            ("kubeflow.org",), tuple(kinds), ("get", "list", "watch", "update", "patch", "delete")
        ),
        PolicyRule(
            ("kubeflow.org",), tuple(f"{k}/status" for k in kinds), ("get", "update", "patch")
        ),
        PolicyRule(("kubeflow.org",), tuple(f"{k}/finalizers" for k in kinds), ("update",)),
        PolicyRule(("",), ("pods", "services"), _CHILD),
        PolicyRule(("",), ("events",), ("create", "patch")),
        PolicyRule(("events.k8s.io",), ("events",), ("create", "patch")),
    ]
    if "MPIJob" in config.kinds:
        rules += [
            PolicyRule(("",), ("configmaps", "secrets"), _CHILD),
            PolicyRule(("batch",), ("jobs",), _CHILD),
        ]
    # No HorizontalPodAutoscaler or PodGroup rights: the operator creates neither yet
    # (elastic metrics and gang scheduling are not implemented), and unused rights are
    # exactly what least privilege forbids.
    return rules


def leader_election_rules() -> list[PolicyRule]:
    """Rules in the operator's own namespace for its Lease."""
    return [
        PolicyRule(
            ("coordination.k8s.io",), ("leases",), ("create", "get", "list", "update", "watch")
        )
    ]
