"""What a rule is, for both API groups (a CEL rule the API server enforces and a Python
check ``kubetrain validate`` runs, with one shared message; :class:`Rule` for the object,
:class:`Transition` for updates), and the helpers both sides use to read a raw wire job."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import CelRule
from kubetrain.api.crd_generator import VALUES, PlacedRule
from kubetrain.api.errors import FieldError
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.wire import as_dict, as_int, at

#: The Python side of a rule: the errors it finds in a raw wire object.
Check = Callable[[dict[str, Any]], list[FieldError]]

#: Where a rule's CEL sits when ``self`` is the whole object: the CRD's root.
ROOT: tuple[str, ...] = ()


def replica_node(info: KindInfo) -> tuple[str, ...]:
    """Where a rule over one replica of a v1 kind sits: on each replica spec (``self`` is
    one entry of the replica specs map). Its cost is then estimated per replica spec, and
    the API server's message names the replica type."""
    return ("spec", info.replica_specs_field, VALUES)


@dataclass(frozen=True)
class Rule:
    """One rule of the ``kinds`` whose CRD carries it, of either API group, stated twice
    with one message: ``cel`` placed on a node of the CRD schema (``node``: the path of
    property names from the root, :data:`~kubetrain.api.crd_generator.ITEMS` for a list's
    items and :data:`~kubetrain.api.crd_generator.VALUES` for a map's values; ``self`` is
    that node's value, so the API server's message names the offending field) and
    ``check``, the Python side ``kubetrain validate`` runs on the whole wire object.
    ``field_path`` is the CEL rule's ``fieldPath``, where the node alone does not say."""

    name: str
    kinds: tuple[str, ...]
    message: str
    cel: str
    node: tuple[str, ...]
    check: Check
    field_path: str | None = None

    def cel_rule(self) -> CelRule:
        return CelRule(rule=self.cel, message=self.message, field_path=self.field_path)

    def placed(self) -> PlacedRule:
        """The CEL rule and where the CRD generator puts it."""
        return (self.node, self.cel_rule())


def placed_rules(
    table: Callable[[str, ReplicaLimits], Iterable[Rule]], kind: str
) -> Callable[[ReplicaLimits], list[PlacedRule]]:
    """``kind``'s CEL rules from its group's ``table``, and where they sit: its row of the
    CRD generator."""
    return lambda limits: [rule.placed() for rule in table(kind, limits)]


def cel_transitions(
    table: Callable[[str], Iterable[Transition]], kind: str
) -> Callable[[], list[CelRule]]:
    """``kind``'s update rules from its group's ``table``, as CEL: its row of the CRD
    generator."""
    return lambda: [transition.cel_rule() for transition in table(kind)]


def run_rules(rules: Iterable[Rule], obj: dict[str, Any]) -> list[FieldError]:
    """Run the Python side of ``rules`` on a raw wire object."""
    return run_checks((rule.check for rule in rules), obj)


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


def main_container_invariant(info: KindInfo, quoted: bool = False) -> Rule:
    """Every replica of ``info``'s kind has its main container (by name); ``quoted``: the
    message quotes the name, as that kind's upstream webhook does."""
    message = main_container_message(info, quoted)
    return Rule(
        f"{info.short}-main-container",
        (info.kind,),
        message,
        f"{HAS_CONTAINERS} && "
        f"self.template.spec.containers.exists(c, c.name == '{info.main_container}')",
        replica_node(info),
        _main_container_check(info, message),
        ".template",
    )
