"""Who the operator is allowed to be: its RBAC (rules derived from the operator's own code)
and, cluster-wide, the ValidatingAdmissionPolicy that keeps it out of the excluded
namespaces whatever its ClusterRole allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.constructs.objects import api_object
from kubetrain.controller.rbac import (
    PolicyRule,
    cluster_rules,
    leader_election_rules,
    operator_rules,
    progress_rules,
)

if TYPE_CHECKING:
    from kubetrain.constructs.operator import TrainingOperator


RBAC_API = "rbac.authorization.k8s.io/v1"


def _grant(
    op: TrainingOperator,
    ids: tuple[str, str],
    role_kind: str,
    rules: list[PolicyRule],
    *,
    name: str,
    namespace: str | None,
) -> None:
    """A (Cluster)Role holding ``rules`` and its binding to the operator's ServiceAccount,
    under construct ids ``ids``."""
    role_id, binding_id = ids
    role = op.manifest(
        RBAC_API,
        role_kind,
        {"rules": [r.to_wire() for r in rules]},
        name=name,
        namespace=namespace,
    )
    api_object(op, role_id, role)
    binding = op.manifest(
        RBAC_API,
        f"{role_kind}Binding",
        {
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": op.subject(),
        },
        name=name,
        namespace=namespace,
    )
    api_object(op, binding_id, binding)


def add_rbac(op: TrainingOperator) -> None:
    """The operator's ClusterRole and binding (or a Role and binding per watched
    namespace) from ``operator_rules``, and the Lease role with leader election."""
    rules = operator_rules(op.config)
    cluster = cluster_rules(op.config)
    name = op.props.name
    if op.config.cluster_wide:
        _grant(
            op,
            ("ClusterRole", "ClusterRoleBinding"),
            "ClusterRole",
            rules + cluster,
            name=name,
            namespace=None,
        )
    else:
        for ns in op.config.namespaces:
            _grant(op, (f"Role-{ns}", f"RoleBinding-{ns}"), "Role", rules, name=name, namespace=ns)
        if cluster:
            _grant(
                op,
                ("ClusterRole", "ClusterRoleBinding"),
                "ClusterRole",
                cluster,
                name=name,
                namespace=None,
            )
    if op.config.leader_elect:
        _grant(
            op,
            ("LeaderElectionRole", "LeaderElectionRoleBinding"),
            "Role",
            leader_election_rules(),
            name=f"{name}-leader-election",
            namespace="",
        )
    progress = progress_rules(op.config)
    if progress:
        _grant(
            op,
            ("ProgressRole", "ProgressRoleBinding"),
            "Role",
            progress,
            name=f"{name}-progress",
            namespace="",
        )


def add_exclusion_policy(op: TrainingOperator) -> None:
    """Deny every write the operator's ServiceAccount makes in an excluded namespace
    (its own Lease excepted): the admission chain enforces what the operator's
    field-selected informers already promise, whatever its ClusterRole allows. Its
    cluster-scoped writes (ClusterTrainingRuntimes) are in no namespace: let through."""
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
                    },
                    # The progress server's certificate, in the operator's own namespace.
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["secrets"],
                        "resourceNames": [op.config.progress_secret],
                    },
                ],
            },
            "matchConditions": [
                {
                    "name": "the-operator",
                    "expression": f"request.userInfo.username == '{op.service_account_user}'",
                },
                # A namespaceSelector never skips a cluster-scoped object: without this,
                # the operator could not mark a ClusterTrainingRuntime in use.
                {
                    "name": "in-a-namespace",
                    "expression": "has(request.namespace) && request.namespace != ''",
                },
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
