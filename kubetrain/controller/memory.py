"""What the operator remembers about each job between its reconciles."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class JobMemory:
    """What the operator remembers about a job between reconciles (lost on restart, which
    costs repeated Events only: the counts that matter are in the status)."""

    uid: str = ""
    #: Consecutive reconciles whose child writes the API server refused.
    refusals: int = 0
    #: In-place restart counts, and the scaled replica count, as last reconciled.
    seen_restart_counts: dict[str, int] = field(default_factory=dict)
    seen_scale: dict[str, int] = field(default_factory=dict)
    emitted: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: uids of the job's ended pods whose exit was recorded.
    exited: frozenset[str] = frozenset()

    def remember_event(self, key: str) -> bool:
        """True the first time ``key`` is seen (keeps the last 256 keys)."""
        if key in self.emitted:
            return False
        self.emitted[key] = None
        while len(self.emitted) > 256:
            self.emitted.popitem(last=False)
        return True
