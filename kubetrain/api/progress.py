"""The progress a training process reports, for every job kind: upstream v2.2+'s runtime
status API (which the Kubeflow SDK's ``update_trainjob_status`` calls) for TrainJobs,
and the same API, same body, for the Kubeflow v1 kinds (a kubetrain extension). Here: the
request body and its checks, the paths and token audiences, the names the operator
injects into pods so the SDK finds the server, and the status fields a report writes.

A report's body is ``{"trainerStatus": {...}, "kubetrain": {...}}``, both optional:

- ``trainerStatus`` has ``status.trainerStatus``'s own schema (``progressPercentage``
  0-100, ``estimatedRemainingSeconds`` >= 0, up to 256 ``metrics`` of 1-64 character names
  and values, ``lastUpdatedTime`` RFC 3339): what the SDK sends, written as upstream's
  server writes it;
- ``kubetrain`` (kubetrain's helper sends it; upstream's server would drop it) carries the
  training ``step`` reached and a ``checkpoint`` just completed (``step``, ``location``,
  optional ``completedTime``).

A body with neither writes nothing, as upstream's server does. Any other report also
writes kubetrain's ``progress`` status (``status.progress`` on a v1 job,
``status.kubetrain.progress`` on a TrainJob): the server's time of the report, the
reporting pod, its node and gang attempt, the step and the last checkpoint. That is the
heartbeat the operator's hang detection (``controller/policies/hang``) reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import Field, StrictStr, ValidationError

from kubetrain.api import env_names as E
from kubetrain.api.base import (
    KubeModel,
    NonNegInt64,
    Time,
)
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import KINDS, TRAINJOB
from kubetrain.api.loading import from_pydantic
from kubetrain.api.progress_status import MAX_LOCATION, TrainerStatus

#: The variables the SDK reads (upstream's ``TrainJobStatus`` runtime plugin sets them).
URL_ENV = E.TRAINER_SERVER_URL
CA_CERT_ENV = E.TRAINER_SERVER_CA_CERT
TOKEN_ENV = E.TRAINER_SERVER_TOKEN
#: Where the token and CA are mounted in trainer containers, and their file names.
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_FILE = "ca.crt"
TOKEN_FILE = "token"
VOLUME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600
#: The field manager of the fields a report writes (upstream's).
FIELD_MANAGER = "trainer-status"
MAX_BODY_BYTES = 1 << 16

#: The kinds whose pods may report: TrainJob and every Kubeflow v1 kind.
REPORTING_KINDS: dict[str, KindInfo] = {TRAINJOB.kind: TRAINJOB, **KINDS}

# -- the report's kubetrain extension ----------------------------------------------------


class CheckpointReport(KubeModel):
    step: NonNegInt64
    location: StrictStr = Field(min_length=1, max_length=MAX_LOCATION)
    completed_time: Time | None = None


class ProgressReport(KubeModel):
    step: NonNegInt64 | None = None
    checkpoint: CheckpointReport | None = None


class UpdateRequest(KubeModel):
    """The body of a progress report."""

    trainer_status: TrainerStatus | None = None
    kubetrain: ProgressReport | None = None


# -- paths -------------------------------------------------------------------------------

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PATH = re.compile(
    rf"^/apis/([a-z0-9.-]+)/([a-z0-9]+)/namespaces/({_LABEL})/([a-z]+)/({_LABEL})/status$"
)
_BY_RESOURCE = {(i.group, i.version, i.plural): i for i in REPORTING_KINDS.values()}


def status_path(namespace: str, name: str, info: KindInfo = TRAINJOB) -> str:
    """The path a job's pods POST their progress to (upstream's ``StatusUrl`` for a
    TrainJob; the same shape for the v1 kinds)."""
    return f"/apis/{info.api_version}/namespaces/{namespace}/{info.plural}/{name}/status"


def token_audience(namespace: str, name: str, info: KindInfo = TRAINJOB) -> str:
    """The audience of the token a job's pods present (upstream's ``TokenAudience``: the
    status path without ``/apis/``), so a token for one job is refused for another."""
    return status_path(namespace, name, info).removeprefix("/apis/")


def parse_path(path: str) -> tuple[KindInfo, str, str] | None:
    """``(kind, namespace, name)`` of a status path, or None when it is not one."""
    found = _PATH.match(path.split("?", 1)[0])
    if not found:
        return None
    info = _BY_RESOURCE.get((found.group(1), found.group(2), found.group(5)))
    return (info, found.group(3), found.group(6)) if info else None


def tls_config_map_name(job: str) -> str:
    """The ConfigMap holding the CA bundle a job's pods trust (upstream's name)."""
    return f"{job}-tls-config"


# -- the body ----------------------------------------------------------------------------


def rfc3339_seconds(value: str | datetime) -> str:
    """``value`` as the API server writes a metav1.Time: UTC, whole seconds, ``Z``."""
    parsed = (
        value
        if isinstance(value, datetime)
        else datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    )
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Report:
    """What one report asks to write."""

    #: ``status.trainerStatus`` as written (None: the report has none).
    trainer_status: dict[str, Any] | None = None
    step: int | None = None
    #: ``{"step", "location", "completedTime"?}`` of a checkpoint just completed.
    checkpoint: dict[str, Any] | None = None

    @property
    def empty(self) -> bool:
        return self.trainer_status is None and self.step is None and self.checkpoint is None


def parse_update(body: bytes) -> Report:
    """The report a body asks for; raises JobValidationError naming each bad field, its
    value and what is expected."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise JobValidationError(
            [FieldError("", f'a JSON object {{"trainerStatus": {{...}}}} ({err})')], "the body"
        ) from None
    if not isinstance(decoded, dict):
        raise JobValidationError(
            [FieldError("", 'a JSON object {"trainerStatus": {...}}', type(decoded).__name__)],
            "the body",
        )
    try:
        request = UpdateRequest.model_validate(decoded)
    except ValidationError as err:
        raise JobValidationError(from_pydantic(err, UpdateRequest, "report"), "the body") from None
    trainer_status = None
    if request.trainer_status is not None:
        trainer_status = request.trainer_status.to_wire()
        trainer_status["lastUpdatedTime"] = rfc3339_seconds(trainer_status["lastUpdatedTime"])
    ours = request.kubetrain or ProgressReport()
    checkpoint = ours.checkpoint.to_wire() if ours.checkpoint else None
    if checkpoint and "completedTime" in checkpoint:
        checkpoint["completedTime"] = rfc3339_seconds(checkpoint["completedTime"])
    return Report(trainer_status, ours.step, checkpoint)


@dataclass(frozen=True)
class Reporter:
    """Who sent a report: the pod its token is bound to."""

    pod: str
    node: str = ""
    attempt: int = 0


def progress_patch(report: Report, reporter: Reporter, now: datetime) -> dict[str, Any]:
    """The JSON merge patch of the ``progress`` status a report writes (kubetrain's
    heartbeat): what it leaves out (a step, a checkpoint) stays as the job has it."""
    out: dict[str, Any] = {
        "lastReportTime": rfc3339_seconds(now),
        "pod": reporter.pod,
        "node": reporter.node or None,
        "attempt": reporter.attempt,
    }
    step = report.step
    if step is None and report.checkpoint is not None:
        step = report.checkpoint["step"]
    if step is not None:
        out["step"] = step
    if report.checkpoint is not None:
        out["checkpoint"] = {
            "step": report.checkpoint["step"],
            "location": report.checkpoint["location"],
            "time": report.checkpoint.get("completedTime") or rfc3339_seconds(now),
            "attempt": reporter.attempt,
        }
    return out


def trainer_status_patch(trainer_status: dict[str, Any]) -> dict[str, Any]:
    """``status.trainerStatus`` as a merge patch that replaces it whole (as upstream's
    apply does): the fields a report leaves out are removed."""
    return {
        **{k: None for k in ("progressPercentage", "estimatedRemainingSeconds", "metrics")},
        **trainer_status,
    }


def checkpoint_refusal(report: Report, reporter: Reporter, previous: dict[str, Any] | None) -> str:
    """Why a report's checkpoint may not replace the job's last one ('' when it may): its
    step is below the last one's in the same gang attempt or a later one (a restarted gang
    that lost its checkpoint starts over, so a newer attempt may go lower)."""
    last = (previous or {}).get("checkpoint") or {}
    if report.checkpoint is None or "step" not in last:
        return ""
    step, last_step = report.checkpoint["step"], int(last["step"])
    last_attempt = int(last.get("attempt") or 0)
    if step < last_step and reporter.attempt <= last_attempt:
        return (
            f"checkpoint step {step} is below the last checkpoint's, step {last_step} "
            f"(attempt {last_attempt}); a checkpoint step may only go back in a later "
            "gang attempt"
        )
    return ""
