"""Object-level diff between two synthesized versions of a stack."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api.errors import render_value
from kubetrain.manifest import parse_yaml

ObjectKey = tuple[str, str, str]  # kind, namespace, name


@dataclass
class StackDiff:
    added: list[ObjectKey] = field(default_factory=list)
    removed: list[ObjectKey] = field(default_factory=list)
    changed: dict[ObjectKey, list[tuple[str, Any, Any]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def load_version(directory: Path) -> dict[ObjectKey, dict[str, Any]]:
    """The Kubernetes objects of one version folder (chart folders only), by key."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} does not exist: synthesize that version first")
    objects: dict[ObjectKey, dict[str, Any]] = {}
    for path in sorted(directory.glob("[0-9][0-9]-*/*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        obj = parse_yaml(path.read_text())
        meta = obj.get("metadata", {})
        objects[(obj["kind"], meta.get("namespace", ""), meta.get("name", ""))] = obj
    return objects


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, child in value.items():
            out.update(_flatten(child, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, child in enumerate(value):
            out.update(_flatten(child, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def diff_objects(
    old: dict[ObjectKey, dict[str, Any]], new: dict[ObjectKey, dict[str, Any]]
) -> StackDiff:
    result = StackDiff(
        added=sorted(k for k in new if k not in old),
        removed=sorted(k for k in old if k not in new),
    )
    for key in sorted(k for k in old if k in new):
        before, after = _flatten(old[key]), _flatten(new[key])
        fields = [
            (path, before.get(path), after.get(path))
            for path in sorted(set(before) | set(after))
            if before.get(path) != after.get(path)
        ]
        if fields:
            result.changed[key] = fields
    return result


def _label(key: ObjectKey) -> str:
    kind, namespace, name = key
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def format_diff(diff: StackDiff, *, max_fields: int = 20) -> str:
    if diff.empty:
        return "no differences\n"
    lines = [f"+ {_label(k)}" for k in diff.added]
    lines += [f"- {_label(k)}" for k in diff.removed]
    for key, fields in diff.changed.items():
        lines.append(f"~ {_label(key)}")
        for path, before, after in fields[:max_fields]:
            old = "(absent)" if before is None else render_value(before, 60)
            new = "(absent)" if after is None else render_value(after, 60)
            lines.append(f"    {path}: {old} -> {new}")
        if len(fields) > max_fields:
            lines.append(f"    ... and {len(fields) - max_fields} more field(s)")
    summary = f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed"
    return "\n".join([*lines, summary]) + "\n"
