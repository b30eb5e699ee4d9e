"""What a Kubeflow v1 job kind's own module (``kubetrain/api/<kind>.py``) declares beside
its row of the kinds table: the typed model, the kind's own rules and its own defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.rules import Rule

#: A kind's own defaults, applied to the wire ``spec`` of a job (after the defaults every
#: kind gets: stored defaults, restart policies; before the main container's port).
KindDefaults = Callable[[dict[str, Any]], None]


def no_defaults(spec: dict[str, Any]) -> None:
    """A kind without defaults of its own."""


@dataclass(frozen=True)
class JobKind:
    """A Kubeflow v1 job kind as its module declares it: its row, its typed model, the
    rules of its own (beside the ones every kind gets, :mod:`kubetrain.api.invariants`)
    and its own defaults. The loader, the CRD generator and the defaulter iterate these."""

    info: KindInfo
    model: type[JobBase]
    invariants: tuple[Rule, ...] = ()
    defaults: KindDefaults = no_defaults
