"""``NamespaceExclusionPolicy``: the ValidatingAdmissionPolicy that keeps the operator out of
the excluded namespaces whatever its ClusterRole allows.

A cluster-wide operator's field-selected informers already skip those namespaces; this
policy has the admission chain enforce the same promise: every write the operator's
ServiceAccount makes there is denied, but for its own Lease and its progress server's
certificate. Its cluster-scoped writes (marking a ClusterTrainingRuntime in use) are in no
namespace and go through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.constructs.objects import api_object, metadata
from kubetrain.constructs.types import check_dns_label, check_labels

ADMISSION_API = "admissionregistration.k8s.io/v1"


@dataclass(frozen=True, kw_only=True)
class NamespaceExclusionPolicyProps:
    """Props of :class:`NamespaceExclusionPolicy`."""

    name: str
    """The operator's ServiceAccount, whose writes the policy denies; the policy and its
    binding are named ``<name>-excluded-namespaces``. Required."""
    namespace: str
    """The ServiceAccount's namespace. Required."""
    excluded_namespaces: tuple[str, ...]
    """The namespaces the operator never writes in. Required, at least one."""
    lease_name: str
    """The operator's leader-election Lease, which it may still write. Required."""
    secret_name: str
    """The progress server's certificate Secret, which it may still write. Required."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the policy and its binding. Default: none."""

    def __post_init__(self) -> None:
        check_dns_label("name", self.name)
        check_dns_label("namespace", self.namespace)
        if not self.excluded_namespaces:
            raise ValueError(
                "excluded_namespaces (empty) must name at least one namespace, e.g. "
                "('kube-system',): without one there is nothing to keep the operator out of"
            )
        for ns in self.excluded_namespaces:
            check_dns_label("excluded_namespaces", ns)
        check_labels("labels", self.labels)


class NamespaceExclusionPolicy(constructs.Construct):
    """The policy (child id ``Resource``) and its binding (``Binding``), both
    cluster-scoped."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: NamespaceExclusionPolicyProps
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        self.policy_name = f"{props.name}-excluded-namespaces"
        api_object(self, "Resource", self._policy())
        binding = {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": metadata(self.policy_name, props.labels, None),
            "spec": {"policyName": self.policy_name, "validationActions": ["Deny"]},
        }
        api_object(self, "Binding", binding)

    @property
    def service_account_user(self) -> str:
        """The user name the API server gives the operator's ServiceAccount token."""
        return f"system:serviceaccount:{self.props.namespace}:{self.props.name}"

    def _policy(self) -> dict[str, Any]:
        excluded = list(self.props.excluded_namespaces)
        return {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": metadata(self.policy_name, self.props.labels, None),
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
                            "resourceNames": [self.props.lease_name],
                        },
                        # The progress server's certificate, in the operator's own namespace.
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["secrets"],
                            "resourceNames": [self.props.secret_name],
                        },
                    ],
                },
                "matchConditions": [
                    {
                        "name": "the-operator",
                        "expression": f"request.userInfo.username == '{self.service_account_user}'",
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
