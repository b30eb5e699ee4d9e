"""What an elastic job's autoscaler is, whatever its kind: the bounds and metrics of the
HorizontalPodAutoscaler the operator creates and owns for it, and which replicas it
moves. Each framework that autoscales states its own (PyTorch: ``elasticPolicy``); the
operator builds the HPA from this value alone (``controller/plugins/autoscaler.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.api.kinds import PYTORCH, TRAINJOB

#: The kinds whose jobs may own an HPA (the operator's RBAC grants HPAs only with them):
#: elastic PyTorchJobs, and TrainJobs whose torch runtime is elastic.
AUTOSCALED_KINDS: tuple[str, ...] = (PYTORCH.kind, TRAINJOB.kind)


@dataclass(frozen=True)
class Autoscaling:
    """An HPA over a job's scale subresource."""

    replica_type: str
    """The replicas the scale subresource moves (a PyTorchJob's ``Worker``)."""
    unit: str
    """What one replica is called in messages (``workers``)."""
    min_replicas: int
    max_replicas: int
    metrics: tuple[Mapping[str, Any], ...]
    """autoscaling/v2 MetricSpecs, verbatim from the job."""
