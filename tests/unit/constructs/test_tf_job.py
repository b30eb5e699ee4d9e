"""TFJob construct: workers (MultiWorkerMirroredStrategy) or parameter servers."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.constructs.tf_job import TFJob, TFJobProps
from tests.k8s_schema import assert_valid
from tests.unit.constructs.jobs_helpers import TRAINER, synth


def build(**props: Any) -> dict[str, Any]:
    (obj,) = synth(lambda chart: TFJob(chart, "Tf", TFJobProps(image=TRAINER, **props)))
    return obj


def test_parameter_servers_get_no_gpus() -> None:
    obj = build(workers=2, ps=1, chief=True, gpus_per_node=4, all_workers_must_succeed=True)
    specs = obj["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "PS": 1, "Worker": 2}
    assert obj["spec"]["successPolicy"] == "AllWorkers"
    assert specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": 4
    }
    assert "resources" not in specs["PS"]["template"]["spec"]["containers"][0]
    assert specs["Worker"]["template"]["spec"]["containers"][0]["name"] == "tensorflow"
    assert_valid([obj])


def test_fails_without_trainers() -> None:
    with pytest.raises(ValueError) as caught:
        TFJobProps(image=TRAINER, workers=0)
    assert "workers (0) must be >= 1 without a chief" in str(caught.value)
