"""Object names as the API server allows and makes them, for the kinds of both groups:
the length of a DNS label (a job's, a TrainJob's and their children's names), the
DNS-1123 subdomain a runtime may be named with, and the name the server makes from a
``generateName`` prefix, which the rules on derived names check in its stead."""

from __future__ import annotations

from typing import Any

#: Most characters of a DNS-1035 or DNS-1123 label (a Service's or a pod hostname's).
MAX_NAME = 63
#: Most characters of a DNS-1123 subdomain, and what one matches.
MAX_SUBDOMAIN = 253
DNS1123_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: The API server names an object that has only ``generateName`` with at most this many
#: characters of the prefix, then this many random ones.
GENERATED_PREFIX = 58
GENERATED_SUFFIX = 5


def name_or_generated(obj: dict[str, Any]) -> str | None:
    """The object's name; for one with only a ``generateName``, a name as long as the one
    the server will make from it; None when it has neither."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    name, prefix = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        return name
    if isinstance(prefix, str) and prefix:
        return prefix[:GENERATED_PREFIX] + "x" * GENERATED_SUFFIX
    return None
