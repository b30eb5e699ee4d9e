"""Object metadata checked as the API server checks it on every object it stores.

The server validates a custom resource's metadata with the same rules as any object's:
label keys and values, annotation keys and their total size, the namespace, the
``generateName`` prefix and finalizer names. ``kubetrain validate`` applies them too, so a
job it accepts is not refused for its metadata. (The job name's own rule, a DNS-1035 label
of at most 63 characters, is in the typed model and the CRD schema.)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from kubetrain.api.errors import FieldError

_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)
_DNS1035_PREFIX = re.compile(r"[a-z][-a-z0-9]*\Z")
#: The server's limit on all of an object's annotations together (keys and values, bytes).
ANNOTATIONS_MAX_BYTES = 256 * 1024
LABEL_VALUE_MAX = 63

_NAME_PART_RULE = (
    "consist of alphanumeric characters, '-', '_' or '.', and start and end with an "
    "alphanumeric character"
)


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``, e.g. ``app.kubernetes.io/name``),
    or None when it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or "/" in prefix):
        if not prefix:
            return "must have a non-empty prefix before '/'"
        return "must have at most one '/' (an optional DNS subdomain prefix, then a name)"
    if slash and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "must have a prefix that is a DNS-1123 subdomain (lowercase, at most 253)"
    if not name:
        return "must have a non-empty name part"
    if len(name.encode()) > 63:
        return "must have a name part of at most 63 characters"
    if not _NAME_PART.match(name):
        return f"must have a name part that must {_NAME_PART_RULE}"
    return None


def _label_value_problem(value: str) -> str | None:
    if len(value.encode()) > LABEL_VALUE_MAX:
        return f"must be at most {LABEL_VALUE_MAX} characters"
    if value and not _NAME_PART.match(value):
        return f"must be empty or {_NAME_PART_RULE}"
    return None


def _string_map(meta: dict[str, Any], field: str) -> dict[str, str]:
    value = meta.get(field)
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


#: ObjectMeta's fields and what each holds (name, generateName, namespace, labels and
#: annotations are typed by the job model itself).
OBJECT_META_FIELDS: dict[str, str] = {
    "name": "",
    "generateName": "",
    "namespace": "",
    "labels": "",
    "annotations": "",
    "finalizers": "list",
    "ownerReferences": "list",
    "managedFields": "list",
    "uid": "string",
    "resourceVersion": "string",
    "selfLink": "string",
    "creationTimestamp": "string",
    "deletionTimestamp": "string",
    "generation": "integer",
    "deletionGracePeriodSeconds": "integer",
}
_TYPE_CHECKS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "list": ("must be a list", lambda v: isinstance(v, list)),
    "string": ("must be a string", lambda v: isinstance(v, str)),
    "integer": (
        "must be an integer",
        lambda v: isinstance(v, int) and not isinstance(v, bool),
    ),
}


def _suggest_field(key: str) -> str:
    camel = "".join(w.capitalize() if i else w for i, w in enumerate(key.split("_")))
    if camel != key and camel in OBJECT_META_FIELDS:
        return f"did you mean {camel!r}? (manifests use the camelCase names)"
    close = difflib.get_close_matches(key, list(OBJECT_META_FIELDS), n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"expected one of: {', '.join(sorted(OBJECT_META_FIELDS))}"


def check_object_meta(meta: Any) -> list[FieldError]:
    """Problems the API server would find in a job's ``metadata``: unknown fields (its
    strict field validation refuses them), wrong types of the fields the typed model keeps
    as they are, and the rules on names, labels, annotations and finalizers."""
    if meta is None:
        meta = {}  # absent: the name is still required
    if not isinstance(meta, dict):
        return []  # reported by the typed model
    errors: list[FieldError] = []
    for key, value in meta.items():
        if key not in OBJECT_META_FIELDS:
            errors.append(FieldError(f"metadata.{key}", _suggest_field(key), kind="unknown"))
            continue
        wanted = OBJECT_META_FIELDS[key]
        if wanted and not _TYPE_CHECKS[wanted][1](value):
            errors.append(FieldError(f"metadata.{key}", _TYPE_CHECKS[wanted][0], value))
    name, prefix = meta.get("name"), meta.get("generateName")
    if not name and not prefix:
        errors.append(
            FieldError("metadata.name", "name or generateName is required", kind="required")
        )
    if isinstance(prefix, str) and prefix and not _DNS1035_PREFIX.match(prefix):
        errors.append(
            FieldError(
                "metadata.generateName",
                "must be the start of a DNS-1035 label (lowercase letters, digits and '-', "
                "starting with a letter): the server appends 5 random characters to it",
                prefix,
            )
        )
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and (len(namespace) > 63 or not _DNS1123_LABEL.match(namespace)):
        errors.append(
            FieldError(
                "metadata.namespace",
                "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63)",
                namespace,
            )
        )
    for key, value in _string_map(meta, "labels").items():
        problem = qualified_name_problem(key)
        if problem:
            errors.append(FieldError(f"metadata.labels.{key}", f"label key {problem}", key))
        problem = _label_value_problem(value)
        if problem:
            errors.append(FieldError(f"metadata.labels.{key}", f"label value {problem}", value))
    annotations = _string_map(meta, "annotations")
    for key in annotations:
        # The server checks annotation keys in lower case.
        problem = qualified_name_problem(key.lower())
        if problem:
            path = f"metadata.annotations.{key}"
            errors.append(FieldError(path, f"annotation key {problem}", key))
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        errors.append(
            FieldError(
                "metadata.annotations",
                f"all annotations together must be at most {ANNOTATIONS_MAX_BYTES} bytes, "
                f"found {size}",
            )
        )
    finalizers = meta.get("finalizers")
    for index, finalizer in enumerate(finalizers if isinstance(finalizers, list) else []):
        problem = qualified_name_problem(finalizer) if isinstance(finalizer, str) else None
        if problem:
            path = f"metadata.finalizers[{index}]"
            errors.append(FieldError(path, f"finalizer name {problem}", finalizer))
    return errors
