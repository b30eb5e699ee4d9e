"""What the Kubeflow v1 kinds' plugins share: reading a job (the typed API, upstream's
defaults, the plugin's own checks) and their status, which is the operator's model as is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.api.common import JobBase, JobStatus
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.loader import load_job
from kubetrain.controller.model import J, Loaded, Observed, status_or_empty


def body_of(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The job without its status and managedFields (what the typed API reads)."""
    body = {k: v for k, v in raw.items() if k != "status"}
    meta = dict(body.get("metadata") or {})
    meta.pop("managedFields", None)
    body["metadata"] = meta
    return body


class LoadCache:
    """The last ``Loaded`` of each job (by kind and uid), reused while the job reads the
    same: its spec (its generation) and metadata, the resourceVersion aside (a status
    write changes only that, and nothing reads it from the typed job). An entry keeps a
    copy of the metadata, not of the whole job (3 KB a job at 5,000 jobs).

    Parsing, schema-checking and defaulting a job was a quarter of the planner's CPU on
    every reconcile, most of which follow a child's change to a job that did not change.
    The typed job is frozen, so sharing it between reconciles is safe. Least recently
    used entries go beyond ``size``.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, str], tuple[dict[str, Any], Any, Loaded[Any]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def load(
        self,
        raw: Mapping[str, Any],
        validate: Callable[[J], list[FieldError]],
        job_type: type[J],
    ) -> Loaded[J]:
        """``load(raw, validate, job_type)``, from the cache when the job reads as last
        time."""
        body = body_of(raw)
        meta = body["metadata"]
        uid = meta.get("uid")
        if not uid:
            return _load(body, validate, job_type)
        key = (str(body.get("kind")), str(uid))
        same = _what_it_reads(body)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[1] == validate and entry[0] == same:
                self._entries.move_to_end(key)
                cached: Loaded[J] = entry[2]
                return cached
        loaded = _load(body, validate, job_type)
        # A snapshot: a caller changing the job in place must not change the entry too.
        snapshot = _json_copy(same)
        with self._lock:
            self._entries[key] = (snapshot, validate, loaded)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return loaded


def _what_it_reads(body: Mapping[str, Any]) -> dict[str, Any]:
    """What decides whether a job reads as last time: its metadata but the
    resourceVersion, and its spec, which the API server's ``metadata.generation`` stands
    for (it counts every change outside metadata and status, and the job CRDs have a
    status subresource); the whole body when the generation is missing (not stored)."""
    meta = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
    if meta.get("generation") is None:
        return {**body, "metadata": meta}
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "metadata": meta}


def _json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def _load(
    body: dict[str, Any], validate: Callable[[J], list[FieldError]], job_type: type[J]
) -> Loaded[J]:
    try:
        declared = load_job(body)
        job = apply_defaults(declared)
    except JobValidationError as err:
        return Loaded(None, errors=list(err.errors))
    if not isinstance(job, job_type):
        # The registry hands a plugin the jobs of its own kind only.
        raise TypeError(f"the {job_type.__name__} plugin got a {job.kind}")
    errors = validate(job)
    if errors:
        return Loaded(None, errors=errors)
    policy = declared.run_policy.clean_pod_policy if declared.run_policy else None
    return Loaded(job, declared_clean_pod_policy=policy)


LOADED = LoadCache()


def load(
    raw: Mapping[str, Any], validate: Callable[[J], list[FieldError]], job_type: type[J]
) -> Loaded[J]:
    """A v1 job defaulted, or every problem the typed API and ``validate`` find (the
    last result again while the job has not changed: ``LoadCache``). A job of another
    type than ``job_type`` is a programming error (TypeError)."""
    return LOADED.load(raw, validate, job_type)


#: Status fields the progress server writes (never the operator).
REPORTED = ("trainer_status", "progress")


class V1StatusCodec:
    """``status`` is the v1 JobStatus (conditions, replicaStatuses, times)."""

    def read(self, raw_status: Any) -> JobStatus:
        return status_or_empty(JobStatus, raw_status)

    def write(self, job: JobBase | None, status: JobStatus, observed: Observed) -> dict[str, Any]:
        return status.model_copy(update=dict.fromkeys(REPORTED)).to_wire()

    def normalized(self, raw_status: Any) -> dict[str, Any]:
        return self.write(None, self.read(raw_status), Observed())


V1_STATUS = V1StatusCodec()
