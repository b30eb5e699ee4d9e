"""``runPolicy.managedBy`` (a TrainJob's ``spec.managedBy``): a job naming another
controller is left alone entirely (no children, no status), so kubetrain can run next to
Kueue's MultiKueue or a second operator. Absent, or one of the values in
``keys.MANAGED_BY_ACCEPTED`` (kubetrain's own and the upstream operators', since kubetrain
replaces them, Trainer's ``trainjob-controller`` included), means kubetrain's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api.keys import MANAGED_BY_ACCEPTED


def managed_by(raw_job: Mapping[str, Any]) -> str | None:
    """The job's ``spec.runPolicy.managedBy`` as written (read from the raw object, so it
    is honoured even when the rest of the job is invalid)."""
    spec = raw_job.get("spec")
    if not isinstance(spec, Mapping):
        return None
    policy = spec.get("runPolicy")
    value = policy.get("managedBy") if isinstance(policy, Mapping) else spec.get("managedBy")
    return value if isinstance(value, str) else None


def is_ours(raw_job: Mapping[str, Any]) -> bool:
    """Whether kubetrain reconciles this job."""
    value = managed_by(raw_job)
    return value is None or value == "" or value in MANAGED_BY_ACCEPTED
