"""How the operator classifies what goes wrong talking to the API server.

- **temporary** (timeouts, 429, 5xx, connection errors, RBAC not yet granted): retry the
  job with exponential backoff;
- **permanent** (400/422: the API server rejects what the job asks for): the job gets a
  Failed condition with reason ``InvalidSpec`` and the server's message;
- **conflict** (409 on a write with a resourceVersion precondition): the cache was stale;
  requeue quietly, the next reconcile reads fresh state.
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


class ApiError(Exception):
    """A failed API call: HTTP ``status`` (0 when no response), the server's reason and
    message, and the call that failed."""

    def __init__(self, status: int, reason: str, message: str, call: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.call = call
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
