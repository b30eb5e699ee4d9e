"""How the operator classifies what goes wrong talking to the API server.

- **temporary** (timeouts, 429, 5xx, connection errors, RBAC not yet granted): retry the
  job with exponential backoff;
- **permanent** (400/422: the API server rejects what the job asks for): the job gets a
  Failed condition with reason ``InvalidSpec`` and the server's message;
- **conflict** (409 on a write with a resourceVersion precondition): the cache was stale;
  requeue quietly, the next reconcile reads fresh state.

A child the API server *refuses* (:func:`refusal_of`) is reported on the job at once:
admission policy (Pod Security, a webhook's denial) will not change until the job's spec
does, so it fails the job after a bounded number of tries; a ResourceQuota or the
operator's own missing RBAC may clear by itself, so those are retried with backoff while
the job's condition says why it waits. A child whose name is taken by an object the job
does not control is a :class:`ChildConflict`.
"""

from __future__ import annotations

import json
from enum import StrEnum


class ErrorClass(StrEnum):
    """What an API error means for the reconcile that hit it."""

    TEMPORARY = "temporary"
    PERMANENT = "permanent"
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"
    GONE = "gone"


class RefusalKind(StrEnum):
    """Why the API server refused to create or update a child."""

    POLICY = "policy"
    """Pod Security admission or an admission webhook denied it: the spec must change."""
    QUOTA = "quota"
    """A ResourceQuota is exhausted: may clear when other workloads finish."""
    FORBIDDEN = "forbidden"
    """The operator lacks an RBAC right: the platform team must grant it."""


class ApiError(Exception):
    """A failed API call: HTTP ``status`` (0 when no response), the server's reason and
    message, and the call that failed."""

    def __init__(self, status: int, reason: str, message: str, call: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.call = call
        #: The child a reconcile was writing ("Pod ns/name"), when one was.
        self.subject = ""
        where = f"{call}: " if call else ""
        super().__init__(f"{where}HTTP {status} {reason}: {message}")

    @classmethod
    def from_body(cls, status: int, body: bytes, call: str) -> ApiError:
        """Parse a ``Status`` object body (falls back to the raw text)."""
        try:
            doc = json.loads(body or b"{}")
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        text = body.decode("utf-8", "replace") if body else ""
        return cls(
            status, str(doc.get("reason") or ""), str(doc.get("message") or text[:500]), call
        )

    @property
    def error_class(self) -> ErrorClass:
        """How to handle this error (see the module docs)."""
        return classify_status(self.status)


def classify_status(status: int) -> ErrorClass:
    """The class of an HTTP status code."""
    if status == 404:
        return ErrorClass.NOT_FOUND
    if status == 409:
        return ErrorClass.CONFLICT
    if status == 410:
        return ErrorClass.GONE
    if status in (400, 422):
        return ErrorClass.PERMANENT
    return ErrorClass.TEMPORARY


def classify(error: BaseException) -> ErrorClass:
    """The class of any exception raised while reconciling (unknown ones are temporary)."""
    if isinstance(error, ApiError):
        return error.error_class
    return ErrorClass.TEMPORARY


def refusal_of(error: ApiError) -> RefusalKind | None:
    """Whether ``error`` (from a child write) is a refusal, and of which kind; None for
    anything else (a plain invalid object is PERMANENT, see :func:`classify_status`)."""
    text = error.message
    if "admission webhook" in text and "denied the request" in text:
        return RefusalKind.POLICY
    if "ValidatingAdmissionPolicy" in text and "denied request" in text:
        return RefusalKind.POLICY
    if error.status != 403:
        return None
    if "violates PodSecurity" in text:
        return RefusalKind.POLICY
    if "exceeded quota" in text or "must specify limits" in text or "must specify requests" in text:
        return RefusalKind.QUOTA
    return RefusalKind.FORBIDDEN


class ChildConflict(Exception):
    """A child's name is taken by an object this job does not control.

    ``predecessor`` is True when that object belongs to an earlier job of the same kind
    and name (deleted and created again) or is being deleted: garbage collection removes
    it soon, so the job waits instead of failing.
    """

    def __init__(
        self, kind: str, namespace: str, name: str, holder: str, *, predecessor: bool
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.holder = holder
        self.predecessor = predecessor
        super().__init__(f"{kind} {namespace}/{name} already exists and is {holder}")


class Deposed(Exception):
    """A write was refused because this replica cannot prove it still holds the leader
    Lease (it may have been paused past the lease duration): nothing is written until a
    renewal succeeds or another replica takes over."""
