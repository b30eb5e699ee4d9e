"""The reconciler's two small interfaces to the cluster: what it reads (``JobCache``, the
informer caches) and what it writes (``ClusterWriter``). ``cluster_state.KubeCluster``
implements both against the API server; the unit tests use an in-memory cluster."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from kubetrain.controller.decisions import ChildRef, Event
from kubetrain.controller.model import Observed

JobKey = tuple[str, str, str]


class JobCache(Protocol):
    """Reads: a job and its children, from the informer caches."""

    def job(self, key: JobKey) -> dict[str, Any] | None:
        """The job as last seen (None when it is gone)."""
        ...

    def observed(self, key: JobKey, uid: str, now: datetime) -> Observed:
        """The job's children, as last seen, at time ``now``."""
        ...

    def set_awaited(self, key: JobKey, refs: frozenset[tuple[str, str]]) -> None:
        """The children (kind, name) the job's startup gate waits for: any event about
        one of them, even the echo of our own write, must wake the job."""
        ...

    def runtime(self, key: JobKey) -> dict[str, Any] | None:
        """The cached TrainingRuntime / ClusterTrainingRuntime ``key``, or None."""
        ...

    def runtime_users(self, key: JobKey) -> list[Mapping[str, Any]]:
        """The cached TrainJobs that name runtime ``key`` (those being deleted aside)."""
        ...


class ClusterWriter(Protocol):
    """Writes: each raises ``ApiError`` on failure."""

    def apply(self, obj: dict[str, Any]) -> None:
        """Server-side apply a child (create it or update the fields kubetrain owns)."""
        ...

    def create(self, obj: dict[str, Any]) -> bool:
        """Create a child (POST); True when this call created it. A taken name is fine
        (False) only when the existing object is controlled by this job; otherwise raise
        ``ChildConflict`` and leave it alone."""
        ...

    def delete(self, namespace: str, ref: ChildRef) -> None:
        """Delete a child, only if it still has ``ref.uid``."""
        ...

    def ungate(self, namespace: str, ref: ChildRef, gate: str) -> None:
        """Remove scheduling gate ``gate`` from pod ``ref`` (if it still has it)."""
        ...

    def set_runtime_in_use(self, key: JobKey, runtime: Mapping[str, Any], in_use: bool) -> None:
        """Add or remove the in-use annotation of runtime ``key``."""
        ...

    def write_status(self, key: JobKey, raw: Mapping[str, Any], status: dict[str, Any]) -> None:
        """Write the job's status (a stale resourceVersion raises a conflict)."""
        ...

    def patch_job(self, key: JobKey, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply a JSON patch to the job itself (its ``test`` operations are preconditions);
        return the job as the API server now serves it."""
        ...

    def delete_job(self, key: JobKey, uid: str) -> None:
        """Delete the job itself (TTL), only if it still has ``uid``."""
        ...

    def emit_event(self, raw: Mapping[str, Any], event: Event) -> None:
        """Record an Event about the job (best effort)."""
        ...
