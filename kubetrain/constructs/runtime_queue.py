"""What ``queue=`` means on a training runtime: every TrainJob created from the runtime
must be queued in the LocalQueue of that name in its own namespace.

A runtime cannot put its TrainJobs into a queue by itself. Kueue v0.15's TrainJob
integration reads the ``kueue.x-k8s.io/queue-name`` label from the TrainJob's own
metadata only; labels on a (Cluster)TrainingRuntime, or on its pod templates, never reach
it. Two things do: the TrainJob's creator labels it (the Kubeflow SDK 0.5 can:
``train(..., options=[Labels({"kueue.x-k8s.io/queue-name": "gpu"})])``), or Kueue labels
it itself, since a namespace with a LocalQueue named ``default`` gets that queue for every
unlabelled job (LocalQueueDefaulting, beta and on by default since Kueue v0.12).

So a runtime's ``queue`` is a rule, enforced by the API server: a ValidatingAdmissionPolicy
refuses to create a TrainJob of this runtime unless it carries the label with that value,
and says how to add it. Admission policies run after mutating webhooks, so with
``queue="default"`` and a ``default`` LocalQueue in each team namespace, TrainJobs the SDK
creates pass unchanged. A GPU runtime bound to a queue cannot be used to get around the
quota.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, TRAINJOB
from kubetrain.constructs.objects import api_object

ADMISSION_API = "admissionregistration.k8s.io/v1"
#: kubetrain's TrainJob CRD leaves ``runtimeRef.kind`` unset when the user does; Trainer
#: reads an absent kind as ClusterTrainingRuntime.
DEFAULT_RUNTIME_KIND = CLUSTER_TRAINING_RUNTIME.kind


@dataclass(frozen=True, kw_only=True)
class RuntimeQueuePolicyProps:
    """Props of :class:`RuntimeQueuePolicy`."""

    runtime: str
    """The runtime's name."""
    queue: str
    """The LocalQueue name its TrainJobs must carry."""
    namespace: str | None = None
    """The namespace of a TrainingRuntime; None for a ClusterTrainingRuntime."""


class RuntimeQueuePolicy(constructs.Construct):
    """A ValidatingAdmissionPolicy and its binding (child ids ``Policy`` and ``Binding``,
    both named ``kubetrain-runtime-queue-<runtime>``, with the namespace for a
    TrainingRuntime) that refuse TrainJobs of one runtime without its queue label."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: RuntimeQueuePolicyProps
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        kind = TRAINING_RUNTIME.kind if props.namespace else CLUSTER_TRAINING_RUNTIME.kind
        suffix = f"{props.namespace}-{props.runtime}" if props.namespace else props.runtime
        self.name = f"kubetrain-runtime-queue-{suffix}"[:253]
        label = K.KUEUE_QUEUE_NAME_LABEL
        ref = "object.spec.runtimeRef"
        runtime_match = (
            f"{ref}.name == '{props.runtime}' && (has({ref}.kind) ? {ref}.kind : "
            f"'{DEFAULT_RUNTIME_KIND}') == '{kind}'"
        )
        if props.namespace:
            runtime_match += f" && request.namespace == '{props.namespace}'"
        hint = (
            f"with the Kubeflow SDK, train(..., options=[Labels({{'{label}': '{props.queue}'}})])"
        )
        if props.queue == K.KUEUE_DEFAULT_LOCAL_QUEUE:
            hint += ", or create a LocalQueue named default in the namespace (Kueue then adds it)"
        meta: dict[str, Any] = {
            "name": self.name,
            "labels": {"app.kubernetes.io/part-of": "kubetrain"},
        }
        policy = {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": meta,
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [TRAINJOB.group],
                            "apiVersions": ["*"],
                            "operations": ["CREATE"],
                            "resources": [TRAINJOB.plural],
                        }
                    ]
                },
                "matchConditions": [{"name": "of-the-runtime", "expression": runtime_match}],
                "validations": [
                    {
                        "expression": (
                            f"has(object.metadata.labels) && '{label}' in object.metadata.labels"
                            f" && object.metadata.labels['{label}'] == '{props.queue}'"
                        ),
                        "message": (
                            f"TrainJobs of {kind} {props.runtime} must be queued in Kueue: "
                            f"add the label {label}={props.queue} ({hint})"
                        ),
                        "reason": "Invalid",
                    }
                ],
            },
        }
        api_object(self, "Policy", policy)
        binding = {
            "apiVersion": ADMISSION_API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": dict(meta),
            "spec": {"policyName": self.name, "validationActions": ["Deny"]},
        }
        api_object(self, "Binding", binding)
