"""Job manifests and loaded jobs of the v1 kinds, and the environment they are given."""

from __future__ import annotations

from typing import Any, TypeVar

from kubetrain.api import load_job
from kubetrain.api.common import JobBase
from kubetrain.api.kinds import KINDS
from kubetrain.frameworks import EnvVar

J = TypeVar("J", bound=JobBase)


def template(name: str, port: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod template with one container ``name`` (and ``port``, if given)."""
    container: dict[str, Any] = {"name": name, "image": "example/trainer:1"}
    if port is not None:
        container["ports"] = [port]
    return {"spec": {"containers": [container]}}


def loaded(
    model: type[J], spec: dict[str, Any], name: str, namespace: str = "ml", uid: str | None = None
) -> J:
    """A job of ``model``'s kind with ``spec``, through :func:`load_job` (as a user's)."""
    kind = str(model.model_fields["kind"].default)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid is not None:
        metadata["uid"] = uid
    job = load_job(
        {"apiVersion": KINDS[kind].api_version, "kind": kind, "metadata": metadata, "spec": spec}
    )
    assert isinstance(job, model)
    return job


def as_dict(env: list[EnvVar]) -> dict[str, str]:
    """The variables by name (no name twice)."""
    names = [var["name"] for var in env]
    assert len(names) == len(set(names)), f"duplicate variables in {names}"
    return {var["name"]: var["value"] for var in env}
