"""kubetrain.manifest writes the YAML PyYAML's generic safe representer would, whatever
the scalars (its nodes for the JSON types are built directly, for speed)."""

from __future__ import annotations

from typing import Any

import yaml

from kubetrain.manifest import (
    SafeLoader,
    _BaseDumper,
    canonical,
    dump,
    emit_yaml,
    parse_yaml,
    parse_yaml_all,
)


class _Reference(_BaseDumper):  # type: ignore[valid-type,misc]
    """The generic representer, configured as kubetrain.manifest's dumper is."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _literal_when_multiline(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", data, style="|" if "\n" in data else None
    )


_Reference.add_representer(str, _literal_when_multiline)

TRICKY: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "x", "labels": {"a": "true", "b": "1", "c": "", "d": "null"}},
    "data": {
        "script": "#!/bin/sh\necho 'hi'\n  indented: yes\n",
        "trailing": "no newline\nat end",
        "colon": "key: value",
        "hash": "# not a comment",
        "star": "*",
        "quote": 'it\'s "quoted"',
        "unicode": "größe ✓",
        "spaces": "  lead and trail  ",
        "octal": "0755",
        "float-like": "1e3",
    },
    "numbers": [0, -1, 2**40, 1.5, 2.0, True, False, None],
    "empty": {"map": {}, "list": [], "nested": [[], {}, [{"k": []}]]},
    "shared": [{"same": 1}] * 2,
}


def test_dump_matches_the_generic_representer_byte_for_byte() -> None:
    expected = yaml.dump(
        canonical(TRICKY),
        Dumper=_Reference,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 16,
    )
    assert dump(TRICKY) == expected
    assert parse_yaml(dump(TRICKY)) == canonical(TRICKY)


def test_yaml_is_read_as_the_safe_loader_reads_it_with_libyaml() -> None:
    # PyYAML's wheels carry libyaml: the reader everything uses is the C one there.
    assert yaml.__with_libyaml__ and SafeLoader.__name__ == "CSafeLoader"
    text = dump(TRICKY) + "---\n" + dump({"kind": "B", "when": "2026-12-03", "n": "0o17"})
    assert list(parse_yaml_all(text)) == list(yaml.safe_load_all(text))
    assert parse_yaml(dump(TRICKY)) == yaml.safe_load(dump(TRICKY)) == canonical(TRICKY)
    assert parse_yaml(b"a: [1, 2.5, null, yes]\n") == {"a": [1, 2.5, None, True]}
    assert emit_yaml(TRICKY) == yaml.safe_dump(TRICKY)
    assert emit_yaml(TRICKY, width=80, sort_keys=False) == yaml.safe_dump(
        TRICKY, width=80, sort_keys=False
    )
