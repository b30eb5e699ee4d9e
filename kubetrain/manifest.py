"""Deterministic YAML for Kubernetes objects: apiVersion, kind, metadata first, then
every other key sorted; no None values; the same input gives byte-identical output. And
the one way kubetrain, its tests and tools read YAML back (``parse_yaml``, ``parse_yaml_all``)
and write plain YAML fast (``emit_yaml``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

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


#: libyaml's parser (PyYAML's C extension) when this PyYAML has it: the objects
#: ``yaml.safe_load`` makes, about ten times faster: the 2.3 MB ``kubetrain crds`` prints
#: take 0.7 CPU seconds to read instead of 7.
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(stream: str | bytes | IO[str] | IO[bytes]) -> Any:
    """One YAML document, as ``yaml.safe_load`` reads it."""
    return yaml.load(stream, Loader=SafeLoader)


def parse_yaml_all(stream: str | bytes | IO[str] | IO[bytes]) -> Iterator[Any]:
    """Every document of a YAML stream, as ``yaml.safe_load_all`` reads them."""
    return yaml.load_all(stream, Loader=SafeLoader)


def emit_yaml(data: Any, **options: Any) -> str:
    """``data`` as ``yaml.safe_dump(data, **options)`` writes it, with libyaml's emitter
    (the pure-Python one takes 10 s for a 3 MB string)."""
    text: str = yaml.dump(data, Dumper=_BaseDumper, **options)
    return text


_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Block style, insertion order kept (``canonical`` already ordered the keys)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_data(self, data: Any) -> yaml.Node:
        # The nodes SafeRepresenter makes for the JSON types (with block style, no
        # aliases and ``_str_representer``'s literal style), built directly: its generic
        # dispatch was a quarter of a synth's CPU. Anything else goes the generic way.
        kind = type(data)
        if kind is str:
            return yaml.ScalarNode(_STR, data, style="|" if "\n" in data else None)
        if kind is dict:
            pairs = [(self.represent_data(k), self.represent_data(v)) for k, v in data.items()]
            return yaml.MappingNode(_MAP, pairs, flow_style=False)
        if kind is list:
            return yaml.SequenceNode(_SEQ, [self.represent_data(v) for v in data], flow_style=False)
        if kind is bool:
            return yaml.ScalarNode(_BOOL, "true" if data else "false")
        if kind is int:
            return yaml.ScalarNode(_INT, str(data))
        node: yaml.Node = super().represent_data(data)
        return node


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
