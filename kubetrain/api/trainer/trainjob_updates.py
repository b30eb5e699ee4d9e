"""The TrainJob's update rules: CEL transition rules at the CRD root comparing the object
with its stored version (``oldSelf``), each with its Python side ``check(old, new)``.

Upstream makes ``runtimeRef``, ``initializer``, ``trainer``, ``activeDeadlineSeconds`` and
``managedBy`` immutable with transition rules on each field, which run only when the field
is present before and after; here adding or removing them is refused too. A left-out
``apiGroup``, ``kind`` or ``managedBy`` reads as upstream's default, so a client writing
the defaults back changes nothing. ``runtimePatches`` change only while the TrainJob is
suspended before or after the update (how Kueue writes them), but for their times (the
operator stamps those, ``kubetrain.api.trainer.patch_times``), and so do Trainer v2.1's
``podTemplateOverrides`` (how Kueue v0.15 writes them).

An elastic TrainJob (one whose ``status.elastic`` the operator wrote, from its runtime's
torch ``elasticPolicy``) is the exception to ``trainer``'s immutability: its
``spec.trainer.numNodes`` alone may change (``kubectl scale``, an HPA), to a count within
those bounds; it may not be removed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.keys import MANAGED_BY_TRAINER
from kubetrain.api.rules import Transition
from kubetrain.api.trainer.constants import (
    DEFAULT_RUNTIME_API_GROUP,
    DEFAULT_RUNTIME_KIND,
    TRAINJOB,
)
from kubetrain.api.trainer.trainjob import Trainer
from kubetrain.api.wire import as_dict, as_int, at

# --- TrainJob updates ----------------------------------------------------------------------------


def _immutable_message(field: str) -> str:
    return (
        f"spec.{field} is immutable: it cannot be set, changed or removed once the TrainJob exists"
    )


def _unchanged_check(
    field: str, default: Any = None, message: str | None = None
) -> Callable[..., list[FieldError]]:
    def check(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
        before, after = at(old, "spec", field), at(new, "spec", field)
        if (default if before is None else before) != (default if after is None else after):
            return [FieldError(f"spec.{field}", message or _immutable_message(field), after)]
        return []

    return check


def _unchanged_cel(field: str) -> str:
    new, old = f"self.spec.{field}", f"oldSelf.spec.{field}"
    return (
        f"has(self.spec.{field}) == has(oldSelf.spec.{field}) && "
        f"(!has(self.spec.{field}) || {new} == {old})"
    )


#: ``spec.trainer``'s fields but ``numNodes``: those an elastic TrainJob keeps too.
_TRAINER_FIXED = tuple(
    field.alias or name for name, field in Trainer.model_fields.items() if name != "num_nodes"
)
#: The integer fields of ``spec.trainer`` (compared as optionals: shorter rules).
_INT_FIELDS = ("numNodes", "numProcPerNode")
ELASTIC_NODES = (
    "spec.trainer.numNodes of an elastic TrainJob may change only to a count within "
    "status.elastic (minNodes..maxNodes of its runtime's torch elasticPolicy), and may not be "
    "removed"
)


def _elastic(obj: dict[str, Any]) -> dict[str, Any] | None:
    bounds = at(obj, "status", "elastic")
    return bounds if isinstance(bounds, dict) else None


def _trainer_but_nodes(obj: dict[str, Any]) -> dict[str, Any]:
    trainer = as_dict(at(obj, "spec", "trainer"))
    return {k: v for k, v in trainer.items() if k != "numNodes"}


def _check_trainer_unchanged(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    if at(old, "spec", "trainer") == at(new, "spec", "trainer"):
        return []
    if _elastic(old) is not None and _trainer_but_nodes(old) == _trainer_but_nodes(new):
        return []  # the elastic-nodes rule checks the count
    return [FieldError("spec.trainer", _immutable_message("trainer"), at(new, "spec", "trainer"))]


def _check_elastic_nodes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    bounds = _elastic(old)
    before, after = at(old, "spec", "trainer", "numNodes"), at(new, "spec", "trainer", "numNodes")
    if bounds is None or before == after:
        return []
    count = as_int(after)
    low, high = as_int(bounds.get("minNodes")), as_int(bounds.get("maxNodes"))
    if count is None or low is None or high is None or not low <= count <= high:
        return [FieldError("spec.trainer.numNodes", ELASTIC_NODES, after)]
    return []


def _trainer_field(root: str, field: str) -> str:
    """The optional value of ``spec.trainer.<field>`` (none when it or trainer is absent)."""
    return f"{root}.spec.?trainer.?{field}"


def _same_trainer_field(field: str) -> str:
    """``spec.trainer.<field>`` the same before and after (both absent counts). Only the
    integers are compared as optionals: a string or list as an optional loses its size
    bounds, and the API server's cost estimate refuses the rule."""
    if field in _INT_FIELDS:
        return f"{_trainer_field('self', field)} == {_trainer_field('oldSelf', field)}"
    new = f"(has(self.spec.trainer) && has(self.spec.trainer.{field}))"
    old = f"(has(oldSelf.spec.trainer) && has(oldSelf.spec.trainer.{field}))"
    value, before = f"self.spec.trainer.{field}", f"oldSelf.spec.trainer.{field}"
    return f"{new} == {old} && (!{new} || {value} == {before})"


def _trainer_cel() -> str:
    """Every field of ``trainer`` but ``numNodes`` unchanged, and unless the TrainJob is
    elastic, ``numNodes`` and ``trainer`` itself neither (each field compared once: the
    rule costs what comparing ``trainer`` whole costs)."""
    fixed = " && ".join(_same_trainer_field(f) for f in _TRAINER_FIXED)
    present = "has(self.spec.trainer) == has(oldSelf.spec.trainer)"
    return f"{fixed} && ({_ELASTIC_CEL} || ({present} && {_same_trainer_field('numNodes')}))"


_ELASTIC_CEL = "oldSelf.?status.?elastic.hasValue()"
_NODES = _trainer_field("self", "numNodes")
_ELASTIC_NODES_CEL = (
    f"!{_ELASTIC_CEL} || {_NODES} == {_trainer_field('oldSelf', 'numNodes')} || "
    f"({_NODES}.hasValue() && {_NODES}.value() >= oldSelf.status.elastic.minNodes && "
    f"{_NODES}.value() <= oldSelf.status.elastic.maxNodes)"
)


RUNTIME_REF_IMMUTABLE = (
    "spec.runtimeRef is immutable once the TrainJob exists (a left-out apiGroup or kind reads "
    f"as {DEFAULT_RUNTIME_API_GROUP} or {DEFAULT_RUNTIME_KIND})"
)
MANAGED_BY_IMMUTABLE = (
    "spec.managedBy is immutable once the TrainJob exists (left out, it reads as "
    f"{MANAGED_BY_TRAINER})"
)


def _normal_ref(ref: Any) -> tuple[Any, Any, Any]:
    ref = as_dict(ref)
    return (
        ref.get("name"),
        ref.get("apiGroup", DEFAULT_RUNTIME_API_GROUP),
        ref.get("kind", DEFAULT_RUNTIME_KIND),
    )


def _check_runtime_ref_unchanged(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    before, after = at(old, "spec", "runtimeRef"), at(new, "spec", "runtimeRef")
    if _normal_ref(before) != _normal_ref(after):
        return [FieldError("spec.runtimeRef", RUNTIME_REF_IMMUTABLE, after)]
    return []


def _ref_cel(root: str) -> str:
    ref = f"{root}.spec.runtimeRef"
    return (
        f"[{ref}.name, has({ref}.apiGroup) ? {ref}.apiGroup : '{DEFAULT_RUNTIME_API_GROUP}', "
        f"has({ref}.kind) ? {ref}.kind : '{DEFAULT_RUNTIME_KIND}']"
    )


def _managed_by_cel(root: str) -> str:
    # Absent reads as upstream's default, which its CRD would have written.
    return f"(has({root}.spec.managedBy) ? {root}.spec.managedBy : '{MANAGED_BY_TRAINER}')"


PATCHES_WHILE_SUSPENDED = (
    "spec.runtimePatches can only change while the TrainJob is suspended (spec.suspend true "
    "before or after the update); only their times may change while it runs"
)


def _suspended(obj: dict[str, Any]) -> bool:
    return at(obj, "spec", "suspend") is True


OVERRIDES_WHILE_SUSPENDED = (
    "spec.podTemplateOverrides can only change while the TrainJob is suspended (spec.suspend "
    "true before or after the update)"
)


def _while_suspended_check(field: str, message: str) -> Callable[..., list[FieldError]]:
    def check(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
        before, after = at(old, "spec", field) or [], at(new, "spec", field) or []
        if before != after and not (_suspended(old) or _suspended(new)):
            return [FieldError(f"spec.{field}", message)]
        return []

    return check


def _untimed(patches: Any) -> list[Any]:
    """runtimePatches with their times left out (the operator stamps those at any time)."""
    return [
        {k: v for k, v in p.items() if k != "time"} if isinstance(p, dict) else p
        for p in (patches or [])
    ]


def _check_patches_while_suspended(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    before, after = at(old, "spec", "runtimePatches"), at(new, "spec", "runtimePatches")
    if _untimed(before) != _untimed(after) and not (_suspended(old) or _suspended(new)):
        return [FieldError("spec.runtimePatches", PATCHES_WHILE_SUSPENDED)]
    return []


def _list_cel(root: str, field: str) -> str:
    return f"(has({root}.spec.{field}) ? {root}.spec.{field} : [])"


def _patches_cel(root: str) -> str:
    return _list_cel(root, "runtimePatches")


def _untimed_patches_cel(root: str) -> str:
    """The runtimePatches of ``root`` equal those of ``self`` but for their times: the same
    managers in the same order, and the same specs (CEL has no "drop a key")."""
    new, old = _patches_cel("self"), _patches_cel(root)
    spec = "trainingRuntimeSpec"
    return (
        f"{new}.map(p, p.manager) == {old}.map(p, p.manager) && "
        f"{new}.map(p, has(p.{spec})) == {old}.map(p, has(p.{spec})) && "
        f"{new}.filter(p, has(p.{spec})).map(p, p.{spec}) == "
        f"{old}.filter(p, has(p.{spec})).map(p, p.{spec})"
    )


def _suspended_cel(root: str) -> str:
    return f"(has({root}.spec.suspend) && {root}.spec.suspend)"


def _immutable(name: str, field: str) -> Transition:
    return Transition(
        f"trainjob-{name}-immutable",
        TRAINJOB,
        _immutable_message(field),
        _unchanged_cel(field),
        f".spec.{field}",
        _unchanged_check(field),
    )


def trainjob_transitions() -> list[Transition]:
    rules = [
        Transition(
            "trainjob-runtime-ref-immutable",
            TRAINJOB,
            RUNTIME_REF_IMMUTABLE,
            f"{_ref_cel('self')} == {_ref_cel('oldSelf')}",
            ".spec.runtimeRef",
            _check_runtime_ref_unchanged,
        ),
        _immutable("initializer", "initializer"),
        Transition(
            "trainjob-trainer-immutable",
            TRAINJOB,
            _immutable_message("trainer"),
            _trainer_cel(),
            ".spec.trainer",
            _check_trainer_unchanged,
        ),
        _immutable("deadline", "activeDeadlineSeconds"),
        Transition(
            "trainjob-elastic-nodes",
            TRAINJOB,
            ELASTIC_NODES,
            _ELASTIC_NODES_CEL,
            ".spec.trainer.numNodes",
            _check_elastic_nodes,
        ),
        Transition(
            "trainjob-managed-by-immutable",
            TRAINJOB,
            MANAGED_BY_IMMUTABLE,
            f"{_managed_by_cel('self')} == {_managed_by_cel('oldSelf')}",
            ".spec.managedBy",
            _unchanged_check("managedBy", MANAGED_BY_TRAINER, MANAGED_BY_IMMUTABLE),
        ),
        Transition(
            "trainjob-patches-while-suspended",
            TRAINJOB,
            PATCHES_WHILE_SUSPENDED,
            f"{_patches_cel('self')} == {_patches_cel('oldSelf')} || "
            f"{_suspended_cel('self')} || {_suspended_cel('oldSelf')} || "
            f"({_untimed_patches_cel('oldSelf')})",
            ".spec.runtimePatches",
            _check_patches_while_suspended,
        ),
        Transition(
            "trainjob-overrides-while-suspended",
            TRAINJOB,
            OVERRIDES_WHILE_SUSPENDED,
            f"{_list_cel('self', 'podTemplateOverrides')} == "
            f"{_list_cel('oldSelf', 'podTemplateOverrides')} || "
            f"{_suspended_cel('self')} || {_suspended_cel('oldSelf')}",
            ".spec.podTemplateOverrides",
            _while_suspended_check("podTemplateOverrides", OVERRIDES_WHILE_SUSPENDED),
        ),
    ]
    return rules
