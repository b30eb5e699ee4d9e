"""The operator's shared values (``kubetrain.controller.model``)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.common import JobStatus
from kubetrain.api.trainer.trainjob import TrainJobStatus
from kubetrain.controller.model import status_or_empty
from kubetrain.controller.plugins.trainjob_status import TrainJobStatusCodec
from kubetrain.controller.plugins.v1 import V1StatusCodec


@pytest.mark.parametrize("model", [JobStatus, TrainJobStatus])
def test_a_status_that_does_not_parse_reads_as_empty(model: Any) -> None:
    assert status_or_empty(model, {"conditions": "not a list"}) == model()
    assert status_or_empty(model, None) == model()


def test_both_groups_read_a_written_status_and_a_foreign_one() -> None:
    condition = {"type": "Created", "status": "True", "reason": "JobCreated", "message": "m"}
    v1 = V1StatusCodec().read({"conditions": [condition]})
    assert [c.type for c in v1.conditions or []] == ["Created"]
    assert V1StatusCodec().read({"replicaStatuses": 3}) == JobStatus()
    assert TrainJobStatusCodec().normalized({"conditions": 7}) == TrainJobStatus().to_wire()
