"""``RuntimeProtectionPolicy``: runtimes in use are not deleted, and nothing waits on the
operator to say so.

The Kubeflow SDK reads the runtime of every TrainJob it lists or gets
(kubeflow/sdk#797): a runtime deleted under live TrainJobs breaks ``list_jobs`` for the
whole namespace. The operator marks a runtime TrainJobs name with the annotation
``kubetrain.dev/runtime-in-use`` (``controller/runtimes``); this ValidatingAdmissionPolicy
refuses to delete a runtime so marked, with a message saying why and what to do.

Its parameter is the operator's own Deployment, so the refusal holds only while the
operator runs to keep the mark true: with the Deployment scaled to zero, or gone
(``helm uninstall``, Argo CD deleting the app, ``kubectl delete``), every deletion goes
through at once. Nothing is ever left Terminating, as kubetrain 0.1's finalizer was once
the operator had gone. Helm deletes the Deployment before any runtime; Argo CD, retrying,
gets through as soon as the operator's app is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME
from kubetrain.constructs.objects import api_object, metadata
from kubetrain.constructs.types import check_dns_label, check_labels

ADMISSION_API = "admissionregistration.k8s.io/v1"


@dataclass(frozen=True, kw_only=True)
class RuntimeProtectionPolicyProps:
    """Props of :class:`RuntimeProtectionPolicy`."""

    name: str
    """The operator's Deployment, the policy's parameter; the policy and its binding are
    named ``<name>-runtimes-in-use``. Required."""
    namespace: str
    """The Deployment's namespace. Required."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the policy and its binding. Default: none."""

    def __post_init__(self) -> None:
        check_dns_label("name", self.name)
        check_dns_label("namespace", self.namespace)
        check_labels("labels", self.labels)


class RuntimeProtectionPolicy(constructs.Construct):
    """The policy (child id ``Resource``) and its binding (``Binding``) to the operator's
    Deployment, both cluster-scoped."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: RuntimeProtectionPolicyProps
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        self.policy_name = f"{props.name}-runtimes-in-use"
        api_object(self, "Resource", self._policy())
        binding = {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": metadata(self.policy_name, props.labels, None),
            "spec": {
                "policyName": self.policy_name,
                "validationActions": ["Deny"],
                "paramRef": {
                    "name": props.name,
                    "namespace": props.namespace,
                    # No Deployment, no operator to keep the mark true: let it go.
                    "parameterNotFoundAction": "Allow",
                },
            },
        }
        api_object(self, "Binding", binding)

    def _policy(self) -> dict[str, Any]:
        annotation = K.RUNTIME_IN_USE_ANNOTATION
        deployment = f"{self.props.namespace}/{self.props.name}"
        return {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": metadata(self.policy_name, self.props.labels, None),
            "spec": {
                # A policy that cannot be evaluated lets the deletion through: it protects
                # the SDK's reads, and must never be what blocks an uninstall.
                "failurePolicy": "Ignore",
                "paramKind": {"apiVersion": "apps/v1", "kind": "Deployment"},
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [TRAINING_RUNTIME.group],
                            "apiVersions": ["*"],
                            "operations": ["DELETE"],
                            "resources": [
                                TRAINING_RUNTIME.plural,
                                CLUSTER_TRAINING_RUNTIME.plural,
                            ],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": (
                            "!has(oldObject.metadata.annotations) || "
                            f"!('{annotation}' in oldObject.metadata.annotations) || "
                            "(has(params.spec.replicas) && params.spec.replicas == 0)"
                        ),
                        "messageExpression": (
                            "oldObject.kind + ' ' + oldObject.metadata.name + ' is used by "
                            f"TrainJobs ({annotation}, kept by the kubetrain operator "
                            f"{deployment}): delete them first. Running TrainJobs would not "
                            "notice (each runs from its runtime snapshot), but the Kubeflow "
                            "SDK cannot list or get a TrainJob whose runtime is gone."
                            "'"
                        ),
                        "reason": "Forbidden",
                    }
                ],
            },
        }
