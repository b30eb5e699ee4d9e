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
from kubetrain.api.wire import as_dict, at

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
        *(
            Transition(
                f"trainjob-{name}-immutable",
                TRAINJOB,
                _immutable_message(field),
                _unchanged_cel(field),
                f".spec.{field}",
                _unchanged_check(field),
            )
            for name, field in (
                ("initializer", "initializer"),
                ("trainer", "trainer"),
                ("deadline", "activeDeadlineSeconds"),
            )
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
