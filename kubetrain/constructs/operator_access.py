"""Who the operator is allowed to be: its RBAC (rules derived from the operator's own code)
and, cluster-wide, the ValidatingAdmissionPolicy that keeps it out of the excluded
namespaces whatever its ClusterRole allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.constructs.objects import api_object
from kubetrain.controller.rbac import PolicyRule, leader_election_rules, operator_rules

if TYPE_CHECKING:
    from kubetrain.constructs.operator import TrainingOperator


def add_rbac(op: TrainingOperator) -> None:
    """The operator's ClusterRole and binding (or a Role and binding per watched
    namespace) from ``operator_rules``, and the Lease role with leader election."""
    rules = [r.to_wire() for r in operator_rules(op.config)]
    name = op.props.name
    if op.config.cluster_wide:
        api_object(
            op,
            "ClusterRole",
            op.manifest(
                "rbac.authorization.k8s.io/v1", "ClusterRole", {"rules": rules}, namespace=None
            ),
        )
        api_object(
            op,
            "ClusterRoleBinding",
            op.manifest(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                {
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": name,
                    },
                    "subjects": op.subject(),
                },
                namespace=None,
            ),
        )
    else:
        for ns in op.config.namespaces:
            api_object(
                op,
                f"Role-{ns}",
                op.manifest("rbac.authorization.k8s.io/v1", "Role", {"rules": rules}, namespace=ns),
            )
            api_object(
                op,
                f"RoleBinding-{ns}",
                op.manifest(
                    "rbac.authorization.k8s.io/v1",
                    "RoleBinding",
                    {
                        "roleRef": {
                            "apiGroup": "rbac.authorization.k8s.io",
                            "kind": "Role",
                            "name": name,
                        },
                        "subjects": op.subject(),
                    },
                    namespace=ns,
                ),
            )
    if op.config.leader_elect:
        lease_rules: list[PolicyRule] = leader_election_rules()
        role_name = f"{name}-leader-election"
        api_object(
            op,
            "LeaderElectionRole",
            op.manifest(
                "rbac.authorization.k8s.io/v1",
                "Role",
                {"rules": [r.to_wire() for r in lease_rules]},
                name=role_name,
            ),
        )
        api_object(
            op,
            "LeaderElectionRoleBinding",
            op.manifest(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                {
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": role_name,
                    },
                    "subjects": op.subject(),
                },
                name=role_name,
            ),
        )


def add_exclusion_policy(op: TrainingOperator) -> None:
    """Deny every write the operator's ServiceAccount makes in an excluded namespace
    (its own Lease excepted): the admission chain enforces what the operator's
    field-selected informers already promise, whatever its ClusterRole allows."""
    name = f"{op.props.name}-excluded-namespaces"
    excluded = list(op.config.exclude_namespaces)
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": op.meta(name, namespace=None),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": excluded,
                        }
                    ]
                },
                "resourceRules": [
                    {
                        "apiGroups": ["*"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["*"],
                    }
                ],
                "excludeResourceRules": [
                    {
                        "apiGroups": ["coordination.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["leases"],
                        "resourceNames": [op.config.leader_election_id],
                    }
                ],
            },
            "matchConditions": [
                {
                    "name": "the-operator",
                    "expression": f"request.userInfo.username == '{op.service_account_user}'",
                }
            ],
            "validations": [
                {
                    "expression": "false",
                    "reason": "Forbidden",
                    "message": (
                        f"the kubetrain operator never writes in the excluded namespaces "
                        f"({', '.join(excluded)})"
                    ),
                }
            ],
        },
    }
    api_object(op, "ExclusionPolicy", policy)
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": op.meta(name, namespace=None),
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    api_object(op, "ExclusionPolicyBinding", binding)
