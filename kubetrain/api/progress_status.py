"""The status fields progress reports and the operator's goodput accounting write
(:mod:`kubetrain.api.progress` says how a report is made): upstream's
``status.trainerStatus``, and kubetrain's ``progress`` and ``goodput`` (``status.progress``
and ``status.goodput`` on a v1 job, under ``status.kubetrain`` on a TrainJob)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictInt, StrictStr

from kubetrain.api.base import (
    KubeModel,
    ListType,
    NonNegInt32,
    NonNegInt64,
    SchemaFormat,
    Time,
)

MAX_LOCATION = 1024

Percentage = Annotated[StrictInt, Field(ge=0, le=100), SchemaFormat("int32")]


class Metric(KubeModel):
    name: StrictStr = Field(min_length=1, max_length=64)
    value: StrictStr = Field(min_length=1, max_length=64)


class TrainerStatus(KubeModel):
    """Progress the training process reports (upstream's alpha TrainJobStatus feature)."""

    progress_percentage: Percentage | None = None
    estimated_remaining_seconds: NonNegInt32 | None = None
    metrics: Annotated[list[Metric], ListType("atomic"), Field(max_length=256)] | None = None
    last_updated_time: Time


class CheckpointStatus(KubeModel):
    """kubetrain: the last checkpoint the job's code reported."""

    step: NonNegInt64
    location: StrictStr = Field(max_length=MAX_LOCATION)
    time: Time
    attempt: NonNegInt32 | None = None


class ProgressStatus(KubeModel):
    """kubetrain: the last progress report (the progress server writes it)."""

    last_report_time: Time
    step: NonNegInt64 | None = None
    pod: StrictStr | None = Field(default=None, max_length=253)
    node: StrictStr | None = Field(default=None, max_length=253)
    attempt: NonNegInt32 | None = None
    checkpoint: CheckpointStatus | None = None


class GoodputStatus(KubeModel):
    """kubetrain: the job's time lost to failures (the operator writes it)."""

    started: Time | None = None
    faults: NonNegInt32 = 0
    lost_seconds: NonNegInt64 = 0
    steps_redone: NonNegInt64 = 0
    open_since: Time | None = None
    ratio: StrictStr | None = Field(default=None, pattern=r"^[01]\.[0-9]{3}$")
