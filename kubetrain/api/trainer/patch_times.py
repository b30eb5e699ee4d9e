"""``spec.runtimePatches[].time``: when each writer last changed its patch, stamped as
upstream Trainer v2.3.0's mutating webhook stamps it (``pkg/webhooks``, TrainJob
defaulter):

- a patch with no time gets the current time;
- a patch whose manager had one before keeps that time while its content is unchanged
  (a time a client sends for it is put back), and gets the current time when its content
  changed (a time the client sends is replaced);
- a new manager's patch keeps the time its writer gave.

kubetrain has no webhook: the operator stamps the times when it first sees the TrainJob
and after each change. What the webhook reads in the old object (each manager's content
and time) is kept in annotation :data:`RECORD_ANNOTATION`, written in the same request
as the times, so nothing is stamped twice and a crash between two writes loses nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain.api.keys import KUBETRAIN_PREFIX

#: Each manager's patch as the operator last stamped it: ``{manager: [digest, time]}``.
RECORD_ANNOTATION = f"{KUBETRAIN_PREFIX}/runtime-patch-times"


def digest(patch: Mapping[str, Any]) -> str:
    """The content of a patch, its time left out, as a short stable digest."""
    content = {k: v for k, v in patch.items() if k != "time"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_record(annotations: Mapping[str, Any] | None) -> dict[str, tuple[str, str]] | None:
    """The record in ``annotations``, or None when there is none (or it is not one the
    operator wrote: then every patch is treated as new)."""
    text = (annotations or {}).get(RECORD_ANNOTATION)
    if not isinstance(text, str):
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    record: dict[str, tuple[str, str]] = {}
    for manager, entry in found.items():
        if isinstance(entry, list) and len(entry) == 2 and all(isinstance(v, str) for v in entry):
            record[str(manager)] = (entry[0], entry[1])
    return record


@dataclass(frozen=True)
class Stamped:
    """The patches with their times, and the record to keep beside them."""

    patches: list[dict[str, Any]]
    record: dict[str, tuple[str, str]]

    def record_text(self) -> str:
        return json.dumps(
            {m: list(entry) for m, entry in sorted(self.record.items())}, separators=(",", ":")
        )


def stamp(
    patches: Sequence[Mapping[str, Any]], record: Mapping[str, tuple[str, str]] | None, now: str
) -> Stamped:
    """``patches`` with each time as the webhook would leave it, ``record`` being what the
    operator recorded last (None: the TrainJob is new to it) and ``now`` an RFC 3339 time
    at second precision."""
    out: list[dict[str, Any]] = []
    kept: dict[str, tuple[str, str]] = {}
    for patch in patches:
        stamped = dict(patch)
        manager = str(patch.get("manager") or "")
        content = digest(patch)
        before = (record or {}).get(manager)
        if before is not None:
            stamped["time"] = before[1] if before[0] == content else now
        elif not stamped.get("time"):
            stamped["time"] = now
        kept[manager] = (content, str(stamped["time"]))
        out.append(stamped)
    return Stamped(out, kept)


def json_patch(raw: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The JSON patch that stamps ``raw``'s runtimePatches and records them, with a
    resourceVersion test first (a TrainJob changed meanwhile refuses it); None when
    there is nothing to write."""
    meta = raw.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    patches = (raw.get("spec") or {}).get("runtimePatches") or []
    record = read_record(annotations)
    if not patches and record is None:
        return None
    stamped = stamp(patches, record, now)
    text = stamped.record_text()
    if stamped.patches == list(patches) and annotations.get(RECORD_ANNOTATION) == text:
        return None
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}
    ]
    if stamped.patches != list(patches):
        ops.append({"op": "replace", "path": "/spec/runtimePatches", "value": stamped.patches})
    if not annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    key = RECORD_ANNOTATION.replace("~", "~0").replace("/", "~1")
    ops.append({"op": "add", "path": f"/metadata/annotations/{key}", "value": text})
    return ops
