"""Whose is an object that already holds a child's name.

The operator creates every child it writes; it never adopts an object it did not
create, and never deletes one (deletions carry a uid precondition taken from its own
cache). When a create answers 409 AlreadyExists, :func:`holder` looks at the existing
object's controller owner reference and says whether it is this job's (a stale cache:
carry on), a predecessor's (an earlier job of the same kind and name, being garbage
collected: wait), or someone else's (a conflict: the job fails, the object is left alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Holder(StrEnum):
    """Who holds a name the job wants for a child."""

    THIS_JOB = "this-job"
    PREDECESSOR = "predecessor"
    OTHER = "other"


@dataclass(frozen=True)
class Verdict:
    """The holder and a description for messages ("not controlled by any object")."""

    holder: Holder
    description: str


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true``, if any."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            found: Mapping[str, Any] = owner
            return found
    return None


def owned_by_batch_job(obj: Mapping[str, Any]) -> bool:
    """Whether a batch Job owns ``obj`` (an MPI launcher's pod goes with its Job: deleting
    or suspending the pod alone would have the Job start another)."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "Job" for o in owners)


def holder(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> Verdict:
    """Compare an existing object with the child we wanted to create in its place.

    ``desired`` carries this job's controller reference (every child does).
    """
    ours = controller_of(desired) or {}
    theirs = controller_of(existing)
    deleting = bool((existing.get("metadata") or {}).get("deletionTimestamp"))
    if theirs is not None and theirs.get("uid") == ours.get("uid"):
        return Verdict(Holder.THIS_JOB, "controlled by this job")
    if theirs is None:
        if deleting:
            return Verdict(Holder.PREDECESSOR, "being deleted")
        return Verdict(Holder.OTHER, "not controlled by any object (created by someone else)")
    owner = f"{theirs.get('kind')} {theirs.get('name')} (uid {theirs.get('uid')})"
    same_job = theirs.get("kind") == ours.get("kind") and theirs.get("name") == ours.get("name")
    if same_job or deleting:
        return Verdict(Holder.PREDECESSOR, f"controlled by an earlier {owner}")
    return Verdict(Holder.OTHER, f"controlled by {owner}")
