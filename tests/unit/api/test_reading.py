"""Reading manifests as kubectl sends them, within limits, without ever raising anything but
``JobValidationError``: the YAML rules of go-yaml v2, numbers as the API server types
them, and every hostile shape issue 15 found (deep nesting, non-UTF-8, alias bombs,
recursive aliases, huge keys) rejected with a message naming where."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kubetrain.api import JobValidationError
from kubetrain.api.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from kubetrain.api.reading import decode_text, read_documents
from kubetrain.api.wire import wire_copy


def _read(text: str) -> list[Any]:
    return list(read_documents(text, "job.yaml"))


def _read_error(text: str) -> str:
    with pytest.raises(JobValidationError) as caught:
        _read(text)
    return str(caught.value)


# go-yaml v2 (what kubectl uses) resolves plain scalars with YAML 1.1's rules; PyYAML's own
# resolver differs on several of these (y, n, 1e3, 1_000 as a float, ...).
@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("yes", True),
        ("y", True),
        ("On", True),
        ("n", False),
        ("off", False),
        ("~", None),
        ("", None),
        ("1e3", 1000),
        ("2.0", 2),
        ("2.5", 2.5),
        (".5", 0.5),
        ("1e400", "1e400"),
        ("0x1F", 31),
        ("017", 15),
        ("0o17", 15),
        ("0b101", 5),
        ("1_000", 1000),
        ("+7", 7),
        ("-0", 0),
        ("08", 8),
        ("9223372036854775807", 2**63 - 1),
        ("18446744073709551615", 2**64 - 1),
        ("+18446744073709551615", 1.8446744073709552e19),
        ("-9223372036854775809", -(2**63)),  # a float, whole and within int64: an int
        ("2001-12-14", "2001-12-14"),
        ("2001-12-14T21:59:43Z", "2001-12-14T21:59:43Z"),
        ("1:20", "1:20"),
        ("500m", "500m"),
        (".nan", math.nan),
        ("-.inf", -math.inf),
        ("'yes'", "yes"),
        ('"1e3"', "1e3"),
        ("!!str 12", "12"),
        ("!!float 3", 3),
        ("!!int '12'", 12),
        ("!custom tagged", "tagged"),
    ],
)
def test_reads_scalars_as_go_yaml_does(scalar: str, value: Any) -> None:
    (doc,) = _read(f"v: {scalar}\n")
    got = doc["v"]
    if isinstance(value, float) and math.isnan(value):
        assert isinstance(got, float) and math.isnan(got)
    else:
        assert got == value and type(got) is type(value), (got, value)


def test_reads_merge_keys_later_keys_winning() -> None:
    (doc,) = _read("base: &b {x: 1, z: 2}\nm:\n  <<: *b\n  z: 3\n")
    assert doc["m"] == {"x": 1, "z": 3}


def test_reads_integer_and_boolean_keys_as_their_text() -> None:
    (doc,) = _read("1: a\ntrue: b\nn: c\n")
    assert doc == {"1": "a", "true": "b", "false": "c"}


def test_reads_every_document_skipping_empty_ones() -> None:
    assert _read("a: 1\n---\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: 1\na: 2\n", "a: is invalid: duplicate key 'a'"),
        ("a: &x [*x]\n", "a[0]: is invalid: alias *x names no complete anchor"),
        ("a: *nowhere\n", "alias *nowhere names no complete anchor"),
        ("? [1]\n: 2\n", "a mapping key must be a string"),
        ("1.5: x\n", "a mapping key must be a string, not a number"),
        ("~: x\n", "a mapping key must be a string, not null"),
        ("a: !!int abc\n", "cannot read 'abc' as int"),
        ("a: !!binary '%%%'\n", "!!binary holds no base64"),
        ("m:\n  <<: 5\n", "a merge key (<<) needs a mapping"),
        ("spec: [unclosed\n", "valid YAML ("),
        ("a: \x07\n", "valid YAML ("),
    ],
)
def test_rejects_unreadable_yaml_naming_where(text: str, fragment: str) -> None:
    assert fragment in _read_error(text)


def test_rejects_nesting_beyond_the_limit_naming_the_path() -> None:
    # Issue 15: about 900 levels raised RecursionError from the YAML parser.
    deep = "kind: PyTorchJob\nspec:\n  x: " + "[" * 900 + "]" * 900 + "\n"
    message = _read_error(deep)
    assert f"nested deeper than {MAX_DEPTH} levels" in message
    assert "spec.x[0][0][0]" in message and "(line 3)" in message
    # Within the limit it reads.
    ok = "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert len(_read(ok)) == 1


def test_rejects_an_alias_whose_expansion_is_too_deep() -> None:
    half = MAX_DEPTH // 2 + 1
    nested = "[" * half + "]" * half
    assert "nested deeper" in _read_error(f"a: &a {nested}\nb: {'[' * half}*a{']' * half}\n")


def test_rejects_an_alias_bomb_by_its_expanded_size() -> None:
    # A few hundred bytes that expand to millions of values (issue 15: a 30 s hang).
    bomb = "a: &a [" + ",".join(["xxxxxxxx"] * 100) + "]\n"
    bomb += "b: &b [" + ",".join(["*a"] * 100) + "]\n"
    bomb += "c: [" + ",".join(["*b"] * 100) + "]\n"
    assert len(bomb) < 2000
    message = _read_error(bomb)
    assert f"more than {MAX_NODES:,} values once YAML aliases are expanded" in message
    assert "c[" in message


def test_aliases_within_the_limit_are_expanded() -> None:
    (doc,) = _read("a: &a {x: 1}\nb: [*a, *a]\n")
    assert doc["b"] == [{"x": 1}, {"x": 1}]


def test_decode_rejects_non_utf8_with_offset_and_line() -> None:
    data = b"kind: PyTorchJob\nmetadata:\n  name: \xff\xfe\n"
    with pytest.raises(JobValidationError) as caught:
        decode_text(data, "job.yaml")
    assert "byte 0xff at offset 35 (line 3) is not UTF-8" in str(caught.value)
    assert str(caught.value).startswith("job.yaml: ")


def test_decode_accepts_a_byte_order_mark() -> None:
    assert decode_text("\ufeffa: 1\n".encode()) == "a: 1\n"


def test_decode_rejects_files_over_the_limit_without_reading_them_as_text() -> None:
    with pytest.raises(JobValidationError, match="must be at most 3,145,728 bytes"):
        decode_text(b"a", "big.yaml", size=MAX_FILE_BYTES + 1)


def test_rejects_lone_surrogates_in_text() -> None:
    assert "lone surrogate" in _read_error("a: \ud800\n")


def test_caps_a_huge_key_in_the_message() -> None:
    key = "k" * 100_000
    message = _read_error(f"spec:\n  {key}: [\n")
    assert len(message) < 1000


# --- wire_copy: a Python object as JSON would send it -------------------------------------------


def test_wire_copy_keeps_values_and_turns_tuples_into_lists() -> None:
    value, errors = wire_copy({"a": (1, 2), "b": None, "c": [None, 2.0], "d": {"e": True}})
    assert errors == []
    assert value == {"a": [1, 2], "b": None, "c": [None, 2.0], "d": {"e": True}}


@pytest.mark.parametrize(
    ("value", "path", "fragment"),
    [
        ({"a": math.nan}, "a", "not a finite number"),
        ({"a": [math.inf]}, "a[0]", "not a finite number"),
        ({"a": 2**63}, "a", "integer out of range"),
        ({"a": -(2**63) - 1}, "a", "integer out of range"),
        ({"a": 10**5000}, "a", "integer out of range"),
        ({"a": {1, 2}}, "a", "found set"),
        ({"a": b"x"}, "a", "found bytes"),
        ({"a": {1: "x"}}, "a", "mapping keys must be strings, found int"),
    ],
)
def test_wire_copy_rejects_what_json_cannot_carry(value: Any, path: str, fragment: str) -> None:
    _, errors = wire_copy(value)
    assert [e.path for e in errors] == [path]
    assert fragment in str(errors[0])


def test_wire_copy_stops_cycles_and_deep_objects_at_the_depth_limit() -> None:
    cycle: dict[str, Any] = {}
    cycle["x"] = cycle
    _, errors = wire_copy(cycle)
    assert len(errors) == 1 and "nested deeper" in errors[0].expected
    assert errors[0].path == ".".join(["x"] * MAX_DEPTH)


def test_wire_copy_stops_at_the_node_limit_on_shared_objects() -> None:
    shared: list[Any] = list(range(1000))
    wide = {"a": [shared] * 1000}  # 1,000,000 values once expanded, 2,000 objects in memory
    _, errors = wire_copy(wide)
    assert len(errors) == 1 and f"more than {MAX_NODES:,} values" in errors[0].expected
