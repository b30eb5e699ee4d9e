"""Which kinds autoscale, and PyTorch's autoscaler read from its ``elasticPolicy``."""

from __future__ import annotations

from kubetrain.controller.trim import trim_autoscaler
from kubetrain.frameworks import FRAMEWORKS, pytorch
from kubetrain.frameworks.elastic import AUTOSCALED_KINDS
from tests.builders import jobs
from tests.builders.observed import typed

CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}


def test_every_framework_that_autoscales_is_granted_hpas() -> None:
    autoscaling = {kind for kind, f in FRAMEWORKS.items() if hasattr(f, "autoscaling")}
    assert autoscaling == {"PyTorchJob"}
    assert autoscaling <= set(AUTOSCALED_KINDS)


def test_pytorch_autoscales_only_an_elastic_job_with_metrics() -> None:
    plain = typed(jobs.pytorch_job(master=False, workers=2))
    assert pytorch.autoscaling(plain) is None
    no_metrics = typed(jobs.pytorch_job(master=False, workers=2, elasticPolicy={"maxReplicas": 3}))
    assert pytorch.autoscaling(no_metrics) is None
    elastic = typed(
        jobs.pytorch_job(
            master=False, workers=2, elasticPolicy={"maxReplicas": 3, "metrics": [CPU]}
        )
    )
    scaling = pytorch.autoscaling(elastic)
    assert scaling is not None
    assert (scaling.replica_type, scaling.unit) == ("Worker", "workers")
    # minReplicas unset: it mirrors maxReplicas (upstream's defaulter).
    assert (scaling.min_replicas, scaling.max_replicas, scaling.metrics) == (3, 3, (CPU,))


def test_the_cache_keeps_what_a_scale_event_quotes_and_no_more() -> None:
    served = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "j", "namespace": "ns", "managedFields": [{"manager": "x"}]},
        "spec": {"scaleTargetRef": {"kind": "PyTorchJob"}, "maxReplicas": 3, "metrics": [CPU]},
        "status": {
            "currentReplicas": 2,
            "desiredReplicas": 3,
            "currentMetrics": [{"type": "Resource"}],
            "conditions": [{"type": "AbleToScale", "status": "True"}],
        },
    }
    kept = trim_autoscaler(served)
    assert kept["metadata"] == {"name": "j", "namespace": "ns"}
    assert kept["spec"] == {"metrics": [CPU]}
    assert kept["status"] == {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentMetrics": [{"type": "Resource"}],
    }
