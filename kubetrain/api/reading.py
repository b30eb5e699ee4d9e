"""Reading manifests into JSON-shaped values, in bounded time and memory.

``kubectl apply -f`` does not send YAML to the API server: it converts each document to
JSON with go-yaml v2's rules, and the server then reads JSON numbers as 64-bit integers or
floats. This module reads a manifest the same way, so that ``kubetrain validate`` judges
what the server will see:

- plain scalars resolve as in go-yaml v2 (YAML 1.1): ``yes``/``no``/``on``/``off``/``y``/``n``
  are booleans, ``1e3`` and ``2.0`` are numbers, ``0x1F`` and ``017`` are integers, while
  timestamps stay strings and quoted scalars are always strings;
- tags other than the core ones are ignored (the content is read as it is written);
- merge keys (``<<: *base``) work, later keys overriding earlier ones;
- a whole float that fits 64 bits is an integer (kubectl sends ``2.0`` as ``2``).

And it refuses, with an error naming the path, what would make reading unbounded or
ambiguous: files over ``MAX_FILE_BYTES``, text that is not UTF-8, nesting deeper than
``MAX_DEPTH``, more than ``MAX_NODES`` values once aliases are expanded (an alias bomb),
recursive aliases, duplicate keys, non-string keys, NaN and infinities, and integers
outside 64 bits. Nothing here recurses, so no input can exhaust the Python stack.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubetrain.api.errors import FieldError, JobValidationError, cap, join_path
from kubetrain.api.limits import (
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
)

_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

DEPTH_MESSAGE = (
    f"nested deeper than {MAX_DEPTH} levels: a job's deepest field is 16 levels down "
    f"(kubetrain reads at most {MAX_DEPTH})"
)
NODES_MESSAGE = (
    f"more than {MAX_NODES:,} values once YAML aliases are expanded: a job has at most a few "
    "thousand (kubetrain's limit against alias bombs)"
)
INT_RANGE_MESSAGE = "integer out of range: the Kubernetes API holds 64-bit integers"
NOT_FINITE_MESSAGE = "not a finite number: JSON has no NaN or infinity"


def size_error(size: int, form: str = "") -> FieldError | None:
    """The error of an input of ``size`` bytes over ``MAX_FILE_BYTES`` (None when within).
    The one size limit of every entry point: manifest files and streams (YAML, ``form``
    empty) and objects handed over in memory (their compact JSON, ``form`` "as JSON")."""
    if size <= MAX_FILE_BYTES:
        return None
    what, fix = (
        (f" {form}", "the API server refuses it: move bulky data into a ConfigMap or image")
        if form
        else ("", "split the stream into several files")
    )
    return FieldError(
        "",
        f"must be at most {MAX_FILE_BYTES:,} bytes{what} (the API server's request limit), "
        f"got {size:,} bytes: {fix}",
    )


def decode_text(data: bytes, source: str = "", *, size: int | None = None) -> str:
    """Manifest bytes as text: at most ``MAX_FILE_BYTES``, UTF-8 (a byte-order mark is
    allowed); otherwise a :class:`JobValidationError` saying what is wrong and where.
    ``size`` is the whole input's size when only its start was read."""
    too_large = size_error(len(data) if size is None else size)
    if too_large is not None:
        raise JobValidationError([too_large], source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise JobValidationError(
            [
                FieldError(
                    "",
                    f"must be UTF-8 text, but byte 0x{data[exc.start]:02x} at offset "
                    f"{exc.start} (line {line}) is not UTF-8: save the manifest as UTF-8",
                )
            ],
            source,
        ) from None
    return text.removeprefix("\ufeff")


# --- YAML -----------------------------------------------------------------------------------

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _BINARY, _MERGE = (f"{_TAG}{t}" for t in ("timestamp", "binary", "merge"))

# go-yaml v2's table of plain scalars with a fixed meaning.
_FIXED: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_MERGE_KEY = "<<"
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?\Z")
_INT_DIGITS = {16: "0123456789abcdefABCDEF", 8: "01234567", 2: "01", 10: "0123456789"}


def _go_int(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 0, 64)`` falling back to ``ParseUint`` (underscores
    already removed): an optional sign, then 0x/0o/0b or a leading 0 for octal."""
    sign = 1
    body = text
    signed = bool(body) and body[0] in "+-"
    if signed:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    base = 10
    lowered = body[:2].lower()
    if lowered in ("0x", "0o", "0b"):
        base = {"0x": 16, "0o": 8, "0b": 2}[lowered]
        body = body[2:]
    elif len(body) > 1 and body[0] == "0":
        base = 8
        body = body[1:]
    if not body or len(body) > 70 or any(c not in _INT_DIGITS[base] for c in body):
        return None
    value = sign * int(body, base)
    if INT64_MIN <= value <= INT64_MAX:
        return value
    # Past int64 only ParseUint is left, which takes no sign.
    return value if not signed and value <= 2**64 - 1 else None


def _plain_scalar(text: str) -> Any:
    """The value of an untagged plain scalar, by go-yaml v2's resolution rules."""
    if text in _FIXED:
        return _FIXED[text]
    first = text[0]
    if first == "." and _DOT_FLOAT.match(text):
        return float(text)
    if first in "+-0123456789":
        plain = text.replace("_", "")
        number = _go_int(plain)
        if number is not None:
            return number
        if _YAML_FLOAT.match(plain):
            value = float(plain)
            # Go's ParseFloat fails on overflow, and go-yaml then keeps the text.
            return text if math.isinf(value) else value
    return text


def _line(event: yaml.Event) -> int:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else 0


class _ReadError(Exception):
    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _scalar(event: yaml.ScalarEvent) -> Any:
    tag = event.tag
    text = event.value
    line = _line(event)
    if tag is None:
        # Quoted scalars are strings; plain ones resolve.
        return _plain_scalar(text) if event.implicit[0] else text
    if tag in (_STR, _TIMESTAMP):
        return text
    if tag == _BINARY:
        try:
            return base64.b64decode("".join(text.split()), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise _ReadError("!!binary holds no base64-encoded UTF-8 text", line) from None
    if tag in (_INT, _FLOAT, _BOOL, _NULL):
        value = _plain_scalar(text)
        wanted: dict[str, type | tuple[type, ...]] = {
            _INT: int,
            _FLOAT: (int, float),
            _BOOL: bool,
            _NULL: type(None),
        }
        expected = wanted[tag]
        wrong_type = not isinstance(value, expected)
        if (isinstance(value, bool) and tag != _BOOL) or wrong_type:
            raise _ReadError(f"cannot read {cap(text, 40)!r} as {tag.removeprefix(_TAG)}", line)
        return float(value) if tag == _FLOAT else value
    # go-yaml reads a scalar with any other tag as its text.
    return text


@dataclass
class _Frame:
    value: dict[str, Any] | list[Any]
    anchor: str | None
    first_node: int
    height: int = 1
    key: str | None = None
    merging: bool = False
    explicit: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Anchored:
    value: Any
    size: int
    height: int


class _Document:
    """Builds one document from parser events, enforcing the limits as it goes."""

    def __init__(self) -> None:
        self.stack: list[_Frame] = []
        self.anchors: dict[str, _Anchored] = {}
        self.nodes = 0
        self.root: Any = None

    def path(self) -> str:
        parts: list[str | int] = []
        for frame in self.stack:
            if isinstance(frame.value, list):
                parts.append(len(frame.value))
            elif frame.key is not None:
                parts.append(frame.key)
        return join_path(parts)

    def count(self, size: int, line: int) -> None:
        self.nodes += size
        if self.nodes > MAX_NODES:
            raise _ReadError(NODES_MESSAGE, line)

    def expecting_key(self) -> bool:
        return (
            bool(self.stack)
            and isinstance(self.stack[-1].value, dict)
            and (self.stack[-1].key is None and not self.stack[-1].merging)
        )

    def open(self, value: dict[str, Any] | list[Any], anchor: str | None, line: int) -> None:
        if self.expecting_key():
            raise _ReadError("a mapping key must be a string, not a mapping or a list", line)
        if len(self.stack) + 1 > MAX_DEPTH:
            raise _ReadError(DEPTH_MESSAGE, line)
        self.count(1, line)
        self.stack.append(_Frame(value, anchor, self.nodes))

    def close(self, line: int) -> None:
        frame = self.stack.pop()
        if frame.anchor is not None:
            size = self.nodes - frame.first_node + 1
            self.anchors[frame.anchor] = _Anchored(frame.value, size, frame.height)
        self.attach(frame.value, frame.height, line, is_scalar=False)

    def scalar(self, event: yaml.ScalarEvent) -> None:
        line = _line(event)
        self.count(1, line)
        is_merge = event.tag is None and event.implicit[0] and event.value == _MERGE_KEY
        if is_merge and self.expecting_key():
            self.stack[-1].merging = True
            return
        value = _json_number(_scalar(event))
        if event.anchor is not None:
            self.anchors[event.anchor] = _Anchored(value, 1, 0)
        self.attach(value, 0, line, is_scalar=True)

    def alias(self, event: yaml.AliasEvent) -> None:
        line = _line(event)
        anchored = self.anchors.get(event.anchor or "")
        if anchored is None:
            raise _ReadError(
                f"alias *{cap(event.anchor or '', 40)} names no complete anchor before it "
                "(undefined, or a recursive structure)",
                line,
            )
        if len(self.stack) + anchored.height > MAX_DEPTH:
            raise _ReadError(DEPTH_MESSAGE, line)
        self.count(anchored.size, line)
        is_scalar = not isinstance(anchored.value, dict | list)
        self.attach(anchored.value, anchored.height, line, is_scalar=is_scalar)

    def attach(self, value: Any, height: int, line: int, *, is_scalar: bool) -> None:
        if not self.stack:
            self.root = value
            return
        parent = self.stack[-1]
        parent.height = max(parent.height, height + 1)
        if isinstance(parent.value, list):
            parent.value.append(value)
            return
        if parent.merging:
            parent.merging = False
            self.merge(parent, value, line)
            return
        if parent.key is None:
            if not is_scalar:
                raise _ReadError("a mapping key must be a string, not a mapping or a list", line)
            parent.key = _key_text(value, line)
            if parent.key in parent.explicit:
                raise _ReadError(
                    f"duplicate key {cap(parent.key, 60)!r} in the same mapping "
                    "(YAML forbids it; which one wins is undefined)",
                    line,
                )
            parent.explicit.add(parent.key)
            return
        parent.value[parent.key] = value
        parent.key = None

    def merge(self, parent: _Frame, value: Any, line: int) -> None:
        assert isinstance(parent.value, dict)
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(source, dict) for source in sources):
            raise _ReadError("a merge key (<<) needs a mapping or a list of mappings", line)
        # As in go-yaml v2: earlier mappings of a list win, and keys written after the
        # merge override it.
        for source in reversed(sources):
            parent.value.update(source)


def _json_number(value: Any) -> Any:
    """What a YAML number becomes on its way to the API server: kubectl writes a whole
    float as integer digits (``2.0`` -> ``2``), which the server reads as an integer when
    it fits 64 bits; other floats stay floats."""
    if isinstance(value, float) and value.is_integer() and INT64_MIN <= value <= INT64_MAX:
        return int(value)
    return value


def _key_text(value: Any, line: int) -> str:
    # The JSON conversion kubectl uses turns integer and boolean keys into their text.
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise _ReadError(f"a mapping key must be a string, not {describe_value(value)}", line)


def describe_value(value: Any) -> str:
    """How an unexpected value is named in a message (its type, never its content)."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return "a number"
    return type(value).__name__


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = str(getattr(exc, "problem", None) or getattr(exc, "context", None) or exc)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"must be valid YAML ({cap(problem, 120)}{where})"


def document_label(source: str, index: int) -> str:
    """How messages name document ``index`` (from 0) of ``source``: ``jobs.yaml document 2``."""
    return f"{source} document {index + 1}" if source else f"document {index + 1}"


def read_documents(text: str, source: str = "") -> Iterator[Any | JobValidationError]:
    """Every non-empty YAML document of ``text`` as a JSON-shaped value (or its error).

    Text over ``MAX_FILE_BYTES`` (UTF-8), a YAML syntax error, or a document over the
    limits, raises :class:`JobValidationError`
    and stops the stream there (documents already yielded stay valid)."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise JobValidationError(
            [FieldError("", f"must be Unicode text: a lone surrogate at offset {exc.start}")],
            source,
        ) from None
    too_large = size_error(size)
    if too_large is not None:
        raise JobValidationError([too_large], source)
    document: _Document | None = None
    index = 0
    try:
        for event in yaml.parse(text, Loader=_Parser):
            if isinstance(event, yaml.DocumentStartEvent):
                document = _Document()
            elif isinstance(event, yaml.DocumentEndEvent):
                assert document is not None
                if document.root is not None:
                    index += 1
                    yield document.root
                document = None
            elif document is None:
                continue
            elif isinstance(event, yaml.ScalarEvent):
                document.scalar(event)
            elif isinstance(event, yaml.AliasEvent):
                document.alias(event)
            elif isinstance(event, yaml.MappingStartEvent):
                document.open({}, event.anchor, _line(event))
            elif isinstance(event, yaml.SequenceStartEvent):
                document.open([], event.anchor, _line(event))
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                document.close(_line(event))
    except yaml.YAMLError as exc:
        raise JobValidationError([FieldError("", _yaml_problem(exc))], source) from None
    except _ReadError as exc:
        assert document is not None
        where = f" (line {exc.line})" if exc.line else ""
        raise JobValidationError(
            [FieldError(document.path(), f"{exc.message}{where}")], document_label(source, index)
        ) from None
