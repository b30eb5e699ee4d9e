"""Deterministic YAML for Kubernetes objects: apiVersion, kind, metadata first, then
every other key sorted; no None values; the same input gives byte-identical output."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

_FIRST = ("apiVersion", "kind", "metadata")


def canonical(value: Any) -> Any:
    """A copy with None values dropped and keys ordered (top-level keys first)."""
    if isinstance(value, dict):
        keys = [k for k in _FIRST if k in value] + sorted(k for k in value if k not in _FIRST)
        return {k: canonical(value[k]) for k in keys if value[k] is not None}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


# libyaml's emitter (PyYAML's C extension) when this PyYAML has it: the same document,
# several times faster than the pure-Python emitter on CRD-sized objects.
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Block style, insertion order kept (``canonical`` already ordered the keys)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def dump(obj: dict[str, Any]) -> str:
    """One object as YAML."""
    return yaml.dump(
        canonical(obj), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1 << 16
    )


def dump_all(objs: Iterable[dict[str, Any]]) -> str:
    """Several objects as a multi-document YAML stream."""
    return "---\n".join(dump(o) for o in objs)
