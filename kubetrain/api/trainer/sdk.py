"""What the Kubeflow Python SDK (``kubeflow`` 0.5) needs of a runtime and a TrainJob to read
them, beyond what the API admits: ``kubetrain validate`` prints these as notes.

The SDK skips a runtime without the framework label, cannot use one without an
``mlPolicy`` or without a replicated job labelled as the trainer step holding a ``node``
container, and raises on any object whose trainer ``resources.limits`` hold no device key
it knows (kubeflow/sdk#516): then ``get_job``, ``list_jobs`` and ``wait_for_job_status``
fail even for a TrainJob the SDK itself created with ``resources_per_node={"memory": ...}``.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.keys import KUBEFLOW_SDK_DEVICE_KEYS
from kubetrain.api.trainer.constants import ANCESTOR_LABEL, ANCESTOR_TRAINER, FRAMEWORK_LABEL, NODE
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob


def sdk_reads_limits(limits: dict[str, Any] | None) -> bool:
    """Whether the SDK can tell a device from these ``resources.limits`` (absent or empty
    limits are fine; limits with none of ``KUBEFLOW_SDK_DEVICE_KEYS`` make it raise)."""
    if not limits:
        return True
    return any(
        key == known or (known.endswith("-") and key.startswith(known))
        for key in limits
        for known in KUBEFLOW_SDK_DEVICE_KEYS
    )


_KNOWN_KEYS = ", ".join(k + "*" if k.endswith("-") else k for k in KUBEFLOW_SDK_DEVICE_KEYS)
_UNREADABLE_LIMITS = (
    f"has resource limits with none of {_KNOWN_KEYS}: the Kubeflow SDK raises reading it "
    "(kubeflow/sdk#516); add cpu or a GPU limit"
)


def runtime_notes(runtime: RuntimeBase) -> list[str]:
    """Why the Kubeflow SDK would skip, or fail on, this runtime (empty when it is fine)."""
    notes = []
    labels = runtime.metadata.labels or {}
    if FRAMEWORK_LABEL not in labels:
        notes.append(f"no {FRAMEWORK_LABEL} label: the Kubeflow SDK skips this runtime")
    if runtime.spec.ml_policy is None:
        notes.append("no spec.mlPolicy: the Kubeflow SDK cannot use this runtime")
    rjobs = runtime.replicated_jobs()
    if any(not rjob.template.get("spec", {}).get("template", {}).get("spec") for rjob in rjobs):
        notes.append(
            "a replicatedJob without a pod spec (template.spec.template.spec): the Kubeflow SDK "
            "raises reading this runtime"
        )
    # The SDK's trainer container: the first 'node' container of the replicated jobs that
    # carry the ancestor label, whatever its value.
    node = next(
        (
            container
            for rjob in rjobs
            if ANCESTOR_LABEL in (rjob.template.get("metadata", {}).get("labels") or {})
            for container in _containers(rjob.template)
            if container.get("name") == NODE
        ),
        None,
    )
    if node is None:
        notes.append(
            f"no '{NODE}' container in a replicatedJob labelled {ANCESTOR_LABEL}: the Kubeflow "
            "SDK cannot use this runtime"
        )
    elif not sdk_reads_limits(node.get("resources", {}).get("limits")):
        notes.append(f"the {ANCESTOR_TRAINER} step's '{NODE}' container {_UNREADABLE_LIMITS}")
    return notes


def trainjob_notes(trainjob: TrainJob) -> list[str]:
    """Why the Kubeflow SDK would fail reading this TrainJob (empty when it is fine)."""
    trainer = trainjob.spec.trainer
    resources = (trainer.resources_per_node if trainer else None) or {}
    if not sdk_reads_limits(resources.get("limits")):
        return [f"spec.trainer.resourcesPerNode {_UNREADABLE_LIMITS}"]
    return []


def _containers(job_template: dict[str, Any]) -> list[dict[str, Any]]:
    pod = job_template.get("spec", {}).get("template", {}).get("spec", {})
    return [c for c in pod.get("containers") or [] if isinstance(c, dict)]
