"""Suspend and resume (``runPolicy.suspend``).

A suspended job has no pods: its pods, Services and (MPI) launcher Job are deleted, the
Suspended condition is True and Running turns False. The MPI SSH Secret and ConfigMap
stay (the key pair is generated once per job). On resume every child is built again
from the *current* spec (mpi-operator#687: launcher changes were ignored), Suspended
turns False with reason ``<Kind>Resumed``, and ``startTime`` restarts the deadline clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubetrain.api.common import RunPolicy
from kubetrain.controller.plugins.base import Observed
from kubetrain.controller.policies.cleanup import ChildRef, ref

#: Kinds of children deleted while a job is suspended.
SUSPENDED_KINDS = ("Pod", "Service", "Job")


def _owned_by_batch_job(obj: Mapping[str, Any]) -> bool:
    # Launcher pods go with their Job (deleting them alone would have it start new ones).
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "Job" for o in owners)


def is_suspended(run_policy: RunPolicy | None) -> bool:
    """Whether ``runPolicy.suspend`` is true."""
    return bool(run_policy and run_policy.suspend)


def children_to_delete(observed: Observed, keep: Iterable[str] = ()) -> list[ChildRef]:
    """Every pod, Service and launcher Job of a suspended job."""
    kept = set(keep)
    out: list[ChildRef] = []
    for kind in SUSPENDED_KINDS:
        for name, obj in sorted(observed.by_kind(kind).items()):
            if name in kept or _owned_by_batch_job(obj):
                continue
            out.append(ref(kind, obj))
    return [r for r in out if not r.deleting]
