"""The progress a training process reports (upstream v2.2+'s runtime status API, which the
Kubeflow SDK's ``update_trainjob_status`` calls): the request body, its checks, and the
names the operator injects into trainer pods so the SDK finds the server.

The body is ``{"trainerStatus": {...}}`` with ``status.trainerStatus``'s own schema
(``progressPercentage`` 0-100, ``estimatedRemainingSeconds`` >= 0, up to 256
``metrics`` of 1-64 character names and values, ``lastUpdatedTime`` RFC 3339); a body
without ``trainerStatus`` is accepted and writes nothing, as upstream's server does.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import ValidationError

from kubetrain.api import env_names as E
from kubetrain.api.base import KubeModel
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.kinds import TRAINJOB
from kubetrain.api.loading import from_pydantic
from kubetrain.api.trainer.trainjob import TrainerStatus

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
#: The field manager of ``status.trainerStatus`` (upstream's).
FIELD_MANAGER = "trainer-status"
MAX_BODY_BYTES = 1 << 16

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PATH = re.compile(
    f"^/apis/{re.escape(TRAINJOB.api_version)}/namespaces/({_LABEL})/{TRAINJOB.plural}/({_LABEL})"
    "/status$"
)


def status_path(namespace: str, name: str) -> str:
    """The path a TrainJob's pods POST their progress to (upstream's ``StatusUrl``)."""
    return f"/apis/{TRAINJOB.api_version}/namespaces/{namespace}/{TRAINJOB.plural}/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    """The audience of the token a TrainJob's pods present (upstream's ``TokenAudience``:
    the status path without ``/apis/``), so a token for one TrainJob is refused for
    another."""
    return status_path(namespace, name).removeprefix("/apis/")


def parse_path(path: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a status path, or None when it is not one."""
    found = _PATH.match(path.split("?", 1)[0])
    return (found.group(1), found.group(3)) if found else None


def tls_config_map_name(trainjob: str) -> str:
    """The ConfigMap holding the CA bundle a TrainJob's pods trust (upstream's name)."""
    return f"{trainjob}-tls-config"


class UpdateRequest(KubeModel):
    """The body of a progress report."""

    trainer_status: TrainerStatus | None = None


def _rfc3339_seconds(value: str) -> str:
    """``value`` as the API server writes a metav1.Time: UTC, whole seconds, ``Z``."""
    parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_update(body: bytes) -> dict[str, Any] | None:
    """The ``status.trainerStatus`` a report asks for (None: nothing to write); raises
    JobValidationError naming each bad field, its value and what is expected."""
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
        raise JobValidationError(
            from_pydantic(err, UpdateRequest, "TrainJob"), "the body"
        ) from None
    if request.trainer_status is None:
        return None
    wire = request.trainer_status.to_wire()
    wire["lastUpdatedTime"] = _rfc3339_seconds(wire["lastUpdatedTime"])
    return wire
