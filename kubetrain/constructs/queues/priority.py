"""``WorkloadPriorityClass``: a priority for Kueue's queueing and preemption only.

A job names one with the label ``kueue.x-k8s.io/priority-class`` (the job constructs'
``workload_priority_class=``). Kueue orders and preempts workloads by it without changing
the pods' own priority; a job without that label gets the value of its pods'
PriorityClass (a job bound to a GPU pool: the pool's ``kubetrain-<pool>-training``), or 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import constructs

from kubetrain.constructs.objects import api_object
from kubetrain.constructs.queues.common import API_VERSION, check_subdomain, metadata
from kubetrain.constructs.types import check_labels

INT32 = 2**31 - 1
MAX_DESCRIPTION = 2048


@dataclass(frozen=True, kw_only=True)
class WorkloadPriorityClassProps:
    """Props of :class:`WorkloadPriorityClass`."""

    name: str
    """Class name (DNS-1123 subdomain), what jobs put in their label."""
    value: int
    """Priority: higher is admitted first and may preempt lower."""
    description: str = ""
    """When to use it (at most 2048 characters). Default: none."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the object. Default: none."""

    def __post_init__(self) -> None:
        check_subdomain("name", self.name)
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(f"value ({self.value!r}) must be an integer")
        if not -INT32 - 1 <= self.value <= INT32:
            raise ValueError(
                f"value ({self.value}) must fit a 32-bit integer ({-INT32 - 1} to {INT32})"
            )
        if len(self.description) > MAX_DESCRIPTION:
            raise ValueError(
                f"description has {len(self.description)} characters: at most {MAX_DESCRIPTION}"
            )
        check_labels("labels", self.labels)


class WorkloadPriorityClass(constructs.Construct):
    """A Kueue WorkloadPriorityClass (``kueue.x-k8s.io/v1beta2``); child id ``Resource``."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: WorkloadPriorityClassProps
    ) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = props.name
        self.manifest: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": metadata(self.name, props.labels),
            "value": props.value,
        }
        if props.description:
            self.manifest["description"] = props.description
        api_object(self, "Resource", self.manifest)
