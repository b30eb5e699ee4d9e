"""Helm templates derived from renders of the constructs, never written by hand.

The chart's templates are not a second description of the manifests. They are found by
rendering the same constructs ``kubetrain synth`` renders, several times:

- **probes**: a value the templates substitute is rendered as a distinctive probe (a port
  of 47813, an image tag ``probe-tag``); wherever the probe shows up in the output, the
  template reads the value instead (:class:`ScalarProbe`). A collection rendered whole
  (a node selector) becomes ``toYaml`` (:class:`WholeProbe`); a list whose every element
  repeats a block of objects or items (a Role per watched namespace) becomes a ``range``
  (:class:`EachProbe`, found from two probe elements). A probe left anywhere else is an
  error: the value reaches the output in a form no template here reproduces.
- **axes**: a value that changes the output's shape (replicas above 1, leader election,
  the enabled kinds) is an :class:`Axis` of options, each a values patch and the Helm
  condition that selects it. Every combination of a group's axes is rendered and the
  renders are merged field by field: where they differ, the template switches on the
  fewest axes that explain the difference. Lists of different lengths are lined up item
  by item (:func:`_slots`), and a node present under some combinations only is written
  once behind the condition that says where (:mod:`kubetrain.gitops.helm.conditions`).

Groups of axes are rendered independently (the other groups at their first option), so
the number of renders is the sum of the groups' products rather than their product; two
groups that change the same field are an error naming both. Whether the templates give
what the constructs give for other values is proven with the real helm in the tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain.gitops.helm.conditions import Assignment, presence_condition
from kubetrain.gitops.helm.nodes import MISSING, Range, Switch
from kubetrain.gitops.helm.probes import Probe, leftover_probe, templatize


@dataclass(frozen=True)
class Option:
    """One choice of an axis: the values it sets (dotted paths), and the Helm condition
    that selects it (None: whatever the options before it did not select)."""

    patch: dict[str, Any]
    condition: str | None


@dataclass(frozen=True)
class Axis:
    name: str
    options: tuple[Option, ...]


Render = Callable[[dict[str, Any]], list[dict[str, Any]] | None]
"""Values -> the objects the constructs render for them, or None when the constructs
refuse the values (that combination is left out)."""


def with_values(values: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``values`` with each dotted path of ``patch`` (``image.tag``) set."""
    out = dict(values)
    for path, value in patch.items():
        *parents, last = path.split(".")
        node = out
        for name in parents:
            node[name] = dict(node[name])
            node = node[name]
        node[last] = value
    return out


# --- merging renders ----------------------------------------------------------------


def object_key(obj: Any) -> str:
    if isinstance(obj, Range):
        return "range:" + object_key(obj.items[0])
    meta = obj.get("metadata", {})
    return f"{obj.get('apiVersion')} {obj.get('kind')} {meta.get('namespace')}/{meta.get('name')}"


def keyed(objects: list[Any]) -> dict[str, Any]:
    """Top-level objects by identity, so the renders merge object by object."""
    out: dict[str, Any] = {}
    for obj in objects:
        key = object_key(obj)
        if key in out:
            raise ValueError(f"two objects render as {key}")
        out[key] = obj
    return out


def _ordered_keys(nodes: Iterable[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for node in nodes:
        previous = -1
        for key in node:
            if key in keys:
                previous = keys.index(key)
            else:
                keys.insert(previous + 1, key)
                previous += 1
    return keys


def _merge_axes(variants: dict[Assignment, Any], axes: Sequence[Axis]) -> Any:
    nodes = list(variants.values())
    if all(n == nodes[0] for n in nodes):
        return nodes[0]
    if all(isinstance(n, dict) for n in nodes):
        merged = {
            key: _merge_axes({a: n.get(key, MISSING) for a, n in variants.items()}, axes)
            for key in _ordered_keys(nodes)
        }
        return {k: v for k, v in merged.items() if v is not MISSING}
    if all(isinstance(n, list) for n in nodes) and len({len(n) for n in nodes}) == 1:
        return [
            _merge_axes({a: n[i] for a, n in variants.items()}, axes) for i in range(len(nodes[0]))
        ]
    if all(isinstance(n, list) and n for n in nodes):
        slots = _slots(variants)
        if slots is not None:
            return [_merge_axes(slot, axes) for slot in slots]
    if (
        all(isinstance(n, Range) for n in nodes)
        and len({(n.source, len(n.items)) for n in nodes}) == 1
    ):
        return Range(
            nodes[0].var,
            nodes[0].source,
            tuple(
                _merge_axes({a: n.items[i] for a, n in variants.items()}, axes)
                for i in range(len(nodes[0].items))
            ),
        )
    index = _presence_axis(variants, len(axes))
    if index is None and any(n is MISSING for n in nodes):
        # Present under a combination of options: one copy, behind their condition.
        presence = {a: n is not MISSING for a, n in variants.items()}
        present = {a: n for a, n in variants.items() if n is not MISSING}
        options = [[o.condition for o in axis.options] for axis in axes]
        return Switch(((presence_condition(presence, options), _merge_axes(present, axes)),))
    if index is None:
        index = _dependent_axis(variants, len(axes))
    axis = axes[index]
    branches: list[tuple[str | None, Any]] = []
    for choice, option in enumerate(axis.options):
        sub = {a: n for a, n in variants.items() if a[index] == choice}
        if sub:
            branches.append((option.condition, _merge_axes(sub, axes)))
    if branches[-1][0] is not None:
        # The last option present is what the earlier conditions did not select.
        branches[-1] = (None, branches[-1][1])
    if all(b[1] == branches[0][1] for b in branches):
        return branches[0][1]
    return Switch(tuple(branches))


def _changed_in_place(item: Any, other: Any) -> bool:
    """Two mappings with the same keys and one value different: one item of a list that
    the options change in place (a rule whose resources follow the enabled kinds)."""
    return (
        isinstance(item, dict)
        and isinstance(other, dict)
        and item.keys() == other.keys()
        and sum(item[k] != other[k] for k in item) == 1
    )


def _frozen(node: Any) -> Any:
    """A hashable stand-in equal for equal JSON-like nodes (dicts, lists, scalars);
    raises TypeError for anything unhashable it does not know."""
    if isinstance(node, dict):
        return ("{", frozenset((k, _frozen(v)) for k, v in node.items()))
    if isinstance(node, list):
        return ("[", tuple(_frozen(v) for v in node))
    hash(node)
    return node


def _slots(variants: dict[Assignment, Any]) -> list[dict[Assignment, Any]] | None:
    """Lists of different lengths lined up item by item, so each item switches on its own
    instead of the whole list being copied per option: one slot per item of any list
    (``variants`` of it, MISSING where a list lacks it), in an order every list keeps.
    An item goes to the slot holding an equal item, else to the one slot holding an item
    it changes in place, else to a new slot after its predecessor's; only slots after the
    predecessor's are candidates, so every list keeps its order. None when a list holds an
    item twice (which of its slots is which would be a guess)."""
    # Items compared by a hashable stand-in where they allow one (the pairwise comparison
    # is quadratic in the lists' lengths), else pairwise.
    try:
        frozen: dict[Assignment, list[Any]] | None = {
            a: [_frozen(item) for item in items] for a, items in variants.items()
        }
    except TypeError:
        frozen = None
    slots: list[dict[Assignment, Any]] = []
    held: dict[int, set[Any]] = {}  # id of a slot -> its items' stand-ins
    # The longest lists first: they set the order the shorter ones mostly follow.
    for assignment, items in sorted(variants.items(), key=lambda v: -len(v[1])):
        if frozen is not None:
            if len(set(frozen[assignment])) != len(items):
                return None
        elif any(items[i] == items[j] for i in range(len(items)) for j in range(i)):
            return None
        previous = -1
        for index, each in enumerate(items):
            free = [s for s in slots[previous + 1 :] if assignment not in s]
            if frozen is not None:
                key = frozen[assignment][index]
                found = [s for s in free if key in held[id(s)]]
            else:
                found = [s for s in free if any(each == other for other in s.values())]
            if not found:
                found = [s for s in free if any(_changed_in_place(each, o) for o in s.values())]
            if len(found) == 1:
                slot = found[0]
            else:
                slot = {}
                slots.insert(previous + 1, slot)
                held[id(slot)] = set()
            slot[assignment] = each
            if frozen is not None:
                held[id(slot)].add(frozen[assignment][index])
            previous = next(i for i, s in enumerate(slots) if s is slot)
    for assignment in variants:
        taken = [i for i, s in enumerate(slots) if assignment in s]
        if [slots[i][assignment] for i in taken] != variants[assignment]:
            return None
    return [{a: slot.get(a, MISSING) for a in variants} for slot in slots]


def _presence_axis(variants: dict[Assignment, Any], count: int) -> int | None:
    """An axis that alone decides whether the node is there: split on it first, so the
    node's own fields switch inside one copy of it."""
    if not any(n is MISSING for n in variants.values()):
        return None
    for index in range(count):
        present: dict[int, set[bool]] = {}
        for a, n in variants.items():
            present.setdefault(a[index], set()).add(n is MISSING)
        if all(len(p) == 1 for p in present.values()) and len(present) > 1:
            return index
    return None


def _dependent_axis(variants: dict[Assignment, Any], count: int) -> int:
    """The first axis whose options give different nodes, all else equal."""
    for index in range(count):
        rest: dict[Assignment, list[Any]] = {}
        for a, n in variants.items():
            rest.setdefault(a[:index] + a[index + 1 :], []).append(n)
        if any(any(n != group[0] for n in group) for group in rest.values()):
            return index
    for index in range(count):
        if len({a[index] for a in variants}) > 1:
            return index
    raise AssertionError("variants differ but no axis varies")


def _merge_groups(
    groups: list[dict[Assignment, Any]], axes: list[Sequence[Axis]], names: list[str], path: str
) -> Any:
    base = next(iter(groups[0].values()))
    varying = [i for i, g in enumerate(groups) if any(n != base for n in g.values())]
    if not varying:
        return base
    if len(varying) == 1:
        return _merge_axes(groups[varying[0]], axes[varying[0]])
    nodes = [n for i in varying for n in groups[i].values()]
    if all(isinstance(n, dict) for n in nodes):
        merged = {
            key: _merge_groups(
                [{a: n.get(key, MISSING) for a, n in g.items()} for g in groups],
                axes,
                names,
                f"{path}.{key}",
            )
            for key in _ordered_keys(nodes)
        }
        return {k: v for k, v in merged.items() if v is not MISSING}
    if all(isinstance(n, list) for n in nodes) and len({len(n) for n in nodes}) == 1:
        return [
            _merge_groups([{a: n[i] for a, n in g.items()} for g in groups], axes, names, path)
            for i in range(len(nodes[0]))
        ]
    if all(isinstance(n, list) for n in nodes):
        return _merge_resized_lists(groups, varying, axes, names, path)
    raise ValueError(
        f"values of {' and '.join(names[i] for i in varying)} both change {path or 'the objects'}: "
        "render them as one group"
    )


def _replace_items(node: Any, old: Any, new: Any) -> Any:
    if isinstance(node, Switch):
        return Switch(tuple((c, _replace_items(n, old, new)) for c, n in node.branches))
    if isinstance(node, list):
        return [new if item == old else item for item in node]
    return node


def _merge_resized_lists(
    groups: list[dict[Assignment, Any]],
    varying: list[int],
    axes: list[Sequence[Axis]],
    names: list[str],
    path: str,
) -> Any:
    """One group changes a list's length (``--namespace`` flags), others change single
    items in place (``--log-level``): the resizing group's lists, with each item the
    others change (found by its base value, which must occur once in every list) merged
    from those groups."""
    base: list[Any] = next(iter(groups[0].values()))
    resizing = [i for i in varying if any(len(n) != len(base) for n in groups[i].values())]
    if len(resizing) != 1:
        raise ValueError(
            f"values of {' and '.join(names[i] for i in resizing)} both resize {path}: "
            "render them as one group"
        )
    (resizer,) = resizing
    merged = _merge_axes(groups[resizer], axes[resizer])
    for index, old in enumerate(base):
        if not any(n[index] != old for i in varying if i != resizer for n in groups[i].values()):
            continue
        if any(n.count(old) != 1 for n in groups[resizer].values()):
            raise ValueError(
                f"{path}[{index}] ({old!r}) changes with {names[resizer]}'s list: it cannot "
                "be told apart from the items that group adds"
            )
        others = [
            {next(iter(g)): old} if i == resizer else {a: n[index] for a, n in g.items()}
            for i, g in enumerate(groups)
        ]
        merged = _replace_items(merged, old, _merge_groups(others, axes, names, f"{path}[{index}]"))
    return merged


def compile_templates(
    render: Render,
    values: dict[str, Any],
    groups: Sequence[tuple[str, Sequence[Axis]]],
    probes: Sequence[Probe],
) -> dict[str, Any]:
    """The templated objects, by identity: every group's axes rendered in every
    combination (the other groups at their first option), probes templated, merged."""
    merged_groups: list[dict[Assignment, Any]] = []
    for name, axes in groups:
        renders: dict[Assignment, Any] = {}
        for assignment in itertools.product(*(range(len(a.options)) for a in axes)):
            patched = values
            for axis, choice in zip(axes, assignment, strict=True):
                patched = with_values(patched, axis.options[choice].patch)
            for other, other_axes in groups:
                if other != name:
                    for axis in other_axes:
                        patched = with_values(patched, axis.options[0].patch)
            objects = render(patched)
            if objects is None:
                if not any(assignment):
                    raise ValueError(f"the first options of group {name} are refused")
                continue
            tree = keyed(templatize(objects, probes))
            where = leftover_probe(list(tree.values()), probes)
            if where:
                raise ValueError(f"a value reaches {where} in a form no template reproduces")
            renders[assignment] = tree
        merged_groups.append(renders)
    axes_list: list[Sequence[Axis]] = [list(axes) for _, axes in groups]
    merged: dict[str, Any] = _merge_groups(
        merged_groups, axes_list, [name for name, _ in groups], ""
    )
    return merged
