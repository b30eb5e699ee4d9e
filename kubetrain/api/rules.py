"""What an invariant is (a CEL rule the API server enforces and a Python check ``kubetrain
validate`` runs, with one shared message), the tables they read, and the helpers both
sides use to read a raw wire job."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import CelRule
from kubetrain.api.errors import FieldError
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.wire import as_dict, as_int, at

#: The Python side of a rule: the errors it finds in a raw wire object.
Check = Callable[[dict[str, Any]], list[FieldError]]

#: Where an invariant's CEL rule sits: at the CRD root (``self`` is the whole job) or on
#: each replica spec (``self`` is one entry of the replica specs map).
ROOT = "root"
REPLICA = "replica"


@dataclass(frozen=True)
class Invariant:
    """One rule: ``cel`` is evaluated at the CRD root (``self`` is the whole object), or
    on each replica spec when ``scope`` is ``REPLICA`` (rules over a replica's containers
    sit there: their cost is estimated per replica spec, and the API server's message
    then names the replica type). ``check`` is the Python side, on the whole job."""

    name: str
    kind: str
    message: str
    cel: str
    field_path: str
    check: Check
    scope: str = ROOT

    def cel_rule(self) -> CelRule:
        return CelRule(rule=self.cel, message=self.message, field_path=self.field_path)


@dataclass(frozen=True)
class Transition:
    """A rule on updates: ``cel`` compares ``self`` with ``oldSelf`` at the CRD root;
    ``check(old, new)`` is the Python side."""

    name: str
    kind: str
    message: str
    cel: str
    field_path: str
    check: Callable[[dict[str, Any], dict[str, Any]], list[FieldError]]

    def cel_rule(self) -> CelRule:
        return CelRule(rule=self.cel, message=self.message, field_path=self.field_path)


def run_checks(checks: Iterable[Check], obj: dict[str, Any]) -> list[FieldError]:
    """The errors of the Python side of rules (of either group) on a raw wire object."""
    return [error for check in checks for error in check(obj)]


def run_transitions(
    rules: Iterable[Transition], old: dict[str, Any], new: dict[str, Any]
) -> list[FieldError]:
    """The errors of the Python side of update rules (``old`` is the stored object)."""
    return [error for rule in rules for error in rule.check(old, new)]


def spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return as_dict(obj.get("spec"))


def specs_of(obj: dict[str, Any], field: str) -> dict[str, Any]:
    """A job's replica specs (``field`` names them)."""
    return as_dict(at(obj, "spec", field))


def replicas_of(replica_spec: Any, default: int = 1) -> int | None:
    """The replica count, ``default`` when absent, None when not a count (not an int, or
    negative: the schema reports those)."""
    if not isinstance(replica_spec, dict):
        return None
    count = as_int(replica_spec.get("replicas", default))
    return count if count is not None and count >= 0 else None


def containers_of(replica_spec: Any) -> list[Any] | None:
    """The template's containers, None when the template has none or is malformed."""
    template = replica_spec.get("template") if isinstance(replica_spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    return containers if isinstance(containers, list) else None


def cel_replicas(specs: str, rtype: str) -> str:
    ref = f"{specs}[{rtype}]"
    return f"(has({ref}.replicas) ? {ref}.replicas : 1)"


def cel_present(field: str, rtype: str) -> str:
    return f"has(self.spec.{field}) && '{rtype}' in self.spec.{field}"


# --- the main container upstream requires (a kind with one names it in its row) ---------

#: Whether a replica spec (``self``) has a list of containers.
HAS_CONTAINERS = "has(self.template.spec) && has(self.template.spec.containers)"


def main_container_message(info: KindInfo, quoted: bool = False) -> str:
    # Upstream's own words, so that scripts looking for them still find them (PaddleJob's
    # webhook quotes the name, the others do not).
    name = f'"{info.main_container}"' if quoted else info.main_container
    return f"must have at least one container with name {name}"


def _main_container_check(info: KindInfo, message: str) -> Check:
    field, name = info.replica_specs_field, info.main_container

    def check(obj: dict[str, Any]) -> list[FieldError]:
        errors = []
        for rtype, rspec in specs_of(obj, field).items():
            containers = containers_of(rspec)
            if not containers:
                continue  # no containers at all: NEEDS_CONTAINERS or the schema says so
            names = [c.get("name") for c in containers if isinstance(c, dict)]
            if name not in names:
                path = f"spec.{field}.{rtype}.template.spec.containers"
                errors.append(FieldError(path, message))
        return errors

    return check


def main_container_invariant(info: KindInfo, quoted: bool = False) -> Invariant:
    """Every replica of ``info``'s kind has its main container (by name); ``quoted``: the
    message quotes the name, as that kind's upstream webhook does."""
    message = main_container_message(info, quoted)
    return Invariant(
        f"{info.short}-main-container",
        info.kind,
        message,
        f"{HAS_CONTAINERS} && "
        f"self.template.spec.containers.exists(c, c.name == '{info.main_container}')",
        ".template",
        _main_container_check(info, message),
        REPLICA,
    )
