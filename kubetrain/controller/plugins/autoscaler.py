"""The HorizontalPodAutoscaler an elastic job owns, and how its decisions read.

As upstream's v1.9 controller (``pkg/controller.v1/pytorch/hpa.go``): one autoscaling/v2
HPA named after the job, in its namespace, controlled by it, whose ``scaleTargetRef`` is
the job itself (the CRD's scale subresource moves the framework's replica type), with the
framework's bounds and the job's metrics verbatim. It is applied again when the job's
bounds or metrics change. Unlike upstream it is also deleted when the job stops asking
for one (``metrics`` removed) and when the job ends: an HPA left on a finished job keeps
resizing a spec nothing runs. A suspended job's HPA is deleted, as upstream does
(``policies/suspend``), and made again on resume.

What a scale Event says about the HPA's decision is ``policies/scaling``'s.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.common import JobBase
from kubetrain.api.kinds import kind_info
from kubetrain.controller.plugins import children
from kubetrain.frameworks.elastic import Autoscaling

KIND = "HorizontalPodAutoscaler"
API_VERSION = "autoscaling/v2"


def hpa(job: JobBase, scaling: Autoscaling) -> dict[str, Any]:
    """The HPA ``job`` owns (its spec-hash annotation set)."""
    info = kind_info(job.kind)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": info.api_version, "kind": job.kind, "name": job.name},
        "minReplicas": scaling.min_replicas,
        "maxReplicas": scaling.max_replicas,
        "metrics": [dict(m) for m in scaling.metrics],
    }
    obj = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": children.metadata(job, job.name, children.job_labels(job)),
        "spec": spec,
    }
    return children.with_hash(obj)
