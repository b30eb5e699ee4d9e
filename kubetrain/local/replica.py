"""What a local run starts (one process per replica) and its error, shared by the planners
(:mod:`kubetrain.local.plan`, :mod:`kubetrain.local.trainjob`), the elastic scaling
(:mod:`kubetrain.local.elastic`) and the runner (:mod:`kubetrain.local.execute`)."""

from __future__ import annotations

from dataclasses import dataclass


class LocalRunError(Exception):
    """The manifest cannot be run locally; the message says why and what to change."""


@dataclass(frozen=True, kw_only=True)
class LocalReplica:
    """One process to start: a replica's main container."""

    replica_type: str
    index: int
    container: str
    argv: list[str]
    env: dict[str, str]
    """Variables set for this replica: the manifest's, then the injected ones."""

    @property
    def label(self) -> str:
        """``<type>-<index>``, as in the replica's pod name."""
        return f"{self.replica_type.lower()}-{self.index}"
