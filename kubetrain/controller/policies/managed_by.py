"""``runPolicy.managedBy``: a job naming another controller is left alone entirely (no
children, no status), so kubetrain can run next to Kueue's MultiKueue or a second
operator. Absent, or one of the values in ``keys.MANAGED_BY_ACCEPTED`` (kubetrain's own
and the upstream operators', since kubetrain replaces them), means kubetrain's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api.keys import MANAGED_BY_ACCEPTED


def managed_by(raw_job: Mapping[str, Any]) -> str | None:
    """The job's ``spec.runPolicy.managedBy`` as written (read from the raw object, so it
    is honoured even when the rest of the job is invalid)."""
    spec = raw_job.get("spec")
    policy = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    value = policy.get("managedBy") if isinstance(policy, Mapping) else None
    return value if isinstance(value, str) else None


def is_ours(raw_job: Mapping[str, Any]) -> bool:
    """Whether kubetrain reconciles this job."""
    value = managed_by(raw_job)
    return value is None or value == "" or value in MANAGED_BY_ACCEPTED
