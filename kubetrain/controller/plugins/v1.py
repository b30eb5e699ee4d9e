"""What the Kubeflow v1 kinds' plugins share: reading a job (the typed API, upstream's
defaults, the plugin's own checks) and their status, which is the operator's model as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from kubetrain.api.common import JobBase, JobStatus
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.loader import load_job
from kubetrain.controller.plugins.base import Loaded, Observed


def body_of(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The job without its status and managedFields (what the typed API reads)."""
    body = {k: v for k, v in raw.items() if k != "status"}
    meta = dict(body.get("metadata") or {})
    meta.pop("managedFields", None)
    body["metadata"] = meta
    return body


def load(raw: Mapping[str, Any], validate: Callable[[JobBase], list[FieldError]]) -> Loaded:
    """A v1 job defaulted, or every problem the typed API and ``validate`` find."""
    try:
        declared = load_job(body_of(raw))
        job = apply_defaults(declared)
    except JobValidationError as err:
        return Loaded(None, errors=list(err.errors))
    errors = validate(job)
    return Loaded(None, errors=errors) if errors else Loaded(job, declared)


class V1StatusCodec:
    """``status`` is the v1 JobStatus (conditions, replicaStatuses, times)."""

    def read(self, raw_status: Any) -> JobStatus:
        try:
            return JobStatus.model_validate(raw_status or {})
        except ValidationError:
            return JobStatus()

    def write(self, job: JobBase | None, status: JobStatus, observed: Observed) -> dict[str, Any]:
        return status.to_wire()

    def normalized(self, raw_status: Any) -> dict[str, Any]:
        return self.read(raw_status).to_wire()


V1_STATUS = V1StatusCodec()
