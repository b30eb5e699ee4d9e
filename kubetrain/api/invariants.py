"""Cross-field invariants, each stated twice: as a CEL rule the API server enforces and as
a Python check ``kubetrain validate`` runs offline, with one shared message.

Upstream Kubeflow checks most of these only in admission webhooks (which MPIJob lacks);
here the CRD itself rejects a bad job, so a manifest kubetrain admits is one upstream's
operators would admit too. Python checks work on the raw wire dict so they can run, and
report, even when other fields of the same document are invalid.

Two rules depend on the platform's :class:`~kubetrain.api.limits.ReplicaLimits` (the most
replicas per replica type and pods per job); they are generated for the limits given to
:func:`invariants_for`, for the CRDs and ``kubetrain validate`` alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.keys import MANAGED_BY_VALUES
from kubetrain.api.kinds import JOB_KIND_APIS, KINDS, REPLICA_FIELDS
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.names import MAX_NAME, name_or_generated
from kubetrain.api.rules import (
    HAS_CONTAINERS,
    ROOT,
    Rule,
    Transition,
    cel_replicas,
    containers_of,
    replica_node,
    replicas_of,
    run_transitions,
    spec_of,
    specs_of,
)

# --- replica types --------------------------------------------------------------------------


def _replica_type_invariant(kind: str) -> Rule:
    info = KINDS[kind]
    field = info.replica_specs_field
    message = info.replica_type_message()
    allowed = info.replica_types
    folded = info.case_insensitive_replica_types

    def check(obj: dict[str, Any]) -> list[FieldError]:
        wanted = {t.lower() for t in allowed} if folded else set(allowed)
        return [
            FieldError(f"spec.{field}.{key}", message, key)
            for key in specs_of(obj, field)
            if (str(key).lower() if folded else key) not in wanted
        ]

    if folded:
        listed = ", ".join(f"'{t.lower()}'" for t in allowed)
        rule = f"!has(self.spec.{field}) || self.spec.{field}.all(k, k.lowerAscii() in [{listed}])"
    else:
        listed = ", ".join(f"'{t}'" for t in allowed)
        rule = f"!has(self.spec.{field}) || self.spec.{field}.all(k, k in [{listed}])"
    return Rule(
        f"{info.short}-replica-types", (kind,), message, rule, ROOT, check, f".spec.{field}"
    )


# --- every kind: pod templates -----------------------------------------------------------

NEEDS_CONTAINERS = "a replica's pod template must have at least one container"
NEEDS_IMAGE = "every container must have an image"


def _containers_check(field: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        errors = []
        for rtype, rspec in specs_of(obj, field).items():
            template = rspec.get("template") if isinstance(rspec, dict) else None
            if not isinstance(template, dict):
                continue  # reported by the schema
            pod = template.get("spec")
            # A pod spec without the containers key: the schema reports it as required.
            if pod is None or (isinstance(pod, dict) and pod.get("containers") == []):
                path = f"spec.{field}.{rtype}.template.spec.containers"
                errors.append(FieldError(path, NEEDS_CONTAINERS, kind="required"))
        return errors

    return check


def _images_check(field: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        errors = []
        for rtype, rspec in specs_of(obj, field).items():
            for index, container in enumerate(containers_of(rspec) or []):
                if isinstance(container, dict) and container.get("image") in (None, ""):
                    path = f"spec.{field}.{rtype}.template.spec.containers[{index}].image"
                    errors.append(FieldError(path, NEEDS_IMAGE, kind="required"))
        return errors

    return check


# --- every kind: runPolicy.managedBy ---------------------------------------------------------

MANAGED_BY = (
    f"runPolicy.managedBy must be one of: {', '.join(MANAGED_BY_VALUES)} "
    "(or left out: kubetrain then reconciles the job)"
)
MANAGED_BY_IMMUTABLE = (
    "runPolicy.managedBy is immutable: it cannot be set, changed or removed once the job exists"
)


def _managed_by(obj: dict[str, Any]) -> Any:
    policy = spec_of(obj).get("runPolicy")
    return policy.get("managedBy") if isinstance(policy, dict) else None


def _check_managed_by(obj: dict[str, Any]) -> list[FieldError]:
    value = _managed_by(obj)
    if value is not None and value not in MANAGED_BY_VALUES:
        return [FieldError("spec.runPolicy.managedBy", MANAGED_BY, value)]
    return []


def _check_managed_by_unchanged(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    before, after = _managed_by(old), _managed_by(new)
    if before != after:
        return [FieldError("spec.runPolicy.managedBy", MANAGED_BY_IMMUTABLE, after)]
    return []


_MANAGED_BY_CEL = (
    "!has(self.spec.runPolicy) || !has(self.spec.runPolicy.managedBy) || "
    f"self.spec.runPolicy.managedBy in [{', '.join(repr(v) for v in MANAGED_BY_VALUES)}]"
)


def _managed_by_of(root: str) -> str:
    # An absent value reads as '', which is never an admitted value.
    policy = f"{root}.spec.runPolicy"
    return f"(has({policy}) && has({policy}.managedBy) ? {policy}.managedBy : '')"


_MANAGED_BY_UNCHANGED_CEL = f"{_managed_by_of('self')} == {_managed_by_of('oldSelf')}"


# --- every kind: replica limits --------------------------------------------------------------


def _per_type_check(
    field: str, limits: ReplicaLimits
) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        errors = []
        for rtype, rspec in specs_of(obj, field).items():
            count = replicas_of(rspec)
            if count is not None and count > limits.max_replicas_per_type:
                path = f"spec.{field}.{rtype}.replicas"
                errors.append(FieldError(path, limits.per_type_message(), count))
        return errors

    return check


def _per_job_check(
    field: str, limits: ReplicaLimits
) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        counts = [replicas_of(rspec) for rspec in specs_of(obj, field).values()]
        total = sum(count for count in counts if count is not None)
        if total > limits.max_pods_per_job:
            return [FieldError(f"spec.{field}", limits.per_job_message(), total)]
        return []

    return check


def _per_job_cel(field: str, limits: ReplicaLimits) -> str:
    specs = f"self.spec.{field}"
    return (
        f"!has({specs}) || {specs}.map(rt, {cel_replicas(specs, 'rt')}).sum() <= "
        f"{limits.max_pods_per_job}"
    )


# --- every kind: child names must be DNS-1035 labels --------------------------------------

NAME_FITS = (
    "job name too long: every child '<name>-<replica type>-<index>' must fit a "
    f"{MAX_NAME}-character DNS-1035 label"
)


def _name_check(field: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        name = name_or_generated(obj)
        if name is None:
            return []
        longest = ""
        for rtype, rspec in specs_of(obj, field).items():
            count = replicas_of(rspec)
            if count is None:
                continue
            child = f"{name}-{str(rtype).lower()}-{max(count - 1, 0)}"
            longest = max(longest, child, key=len)
        if len(longest) > MAX_NAME:
            room = len(name) - (len(longest) - MAX_NAME)
            return [
                FieldError(
                    "metadata.name",
                    f"{NAME_FITS} ({longest[:80]!r} has {len(longest)}); use at most "
                    f"{max(room, 0)} characters",
                    name,
                )
            ]
        return []

    return check


def _name_cel(field: str) -> str:
    specs = f"self.spec.{field}"
    count = (
        f"(has({specs}[rt].replicas) && {specs}[rt].replicas > 1 ? {specs}[rt].replicas - 1 : 0)"
    )
    return (
        f"!has(self.metadata.name) || !has({specs}) || {specs}.all(rt, "
        f"size(self.metadata.name) + size(rt) + 2 + size(string({count})) <= {MAX_NAME})"
    )


# --- the tables ----------------------------------------------------------------------------


def _every_kind(kind: str, limits: ReplicaLimits) -> list[Rule]:
    info = KINDS[kind]
    field, prefix, replica = info.replica_specs_field, info.short, replica_node(info)
    return [
        _replica_type_invariant(kind),
        Rule(
            f"{prefix}-containers",
            (kind,),
            NEEDS_CONTAINERS,
            f"{HAS_CONTAINERS} && size(self.template.spec.containers) > 0",
            replica,
            _containers_check(field),
            ".template",
        ),
        Rule(
            f"{prefix}-images",
            (kind,),
            NEEDS_IMAGE,
            f"!({HAS_CONTAINERS}) || "
            "self.template.spec.containers.all(c, has(c.image) && size(c.image) > 0)",
            replica,
            _images_check(field),
            ".template.spec.containers",
        ),
        Rule(
            f"{prefix}-managed-by",
            (kind,),
            MANAGED_BY,
            _MANAGED_BY_CEL,
            ROOT,
            _check_managed_by,
            ".spec.runPolicy.managedBy",
        ),
        Rule(
            f"{prefix}-replicas-per-type",
            (kind,),
            limits.per_type_message(),
            f"!has(self.replicas) || self.replicas <= {limits.max_replicas_per_type}",
            replica,
            _per_type_check(field, limits),
            ".replicas",
        ),
        Rule(
            f"{prefix}-pods-per-job",
            (kind,),
            limits.per_job_message(),
            _per_job_cel(field, limits),
            ROOT,
            _per_job_check(field, limits),
            f".spec.{field}",
        ),
        Rule(
            f"{prefix}-name-fits",
            (kind,),
            NAME_FITS,
            _name_cel(field),
            ROOT,
            _name_check(field),
            ".metadata.name",
        ),
    ]


def invariants_for(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> tuple[Rule, ...]:
    """Every rule of the v1 kind ``kind``, the replica limits being ``limits``: its own
    (its ``JobKind``) and those every v1 kind gets."""
    return (*JOB_KIND_APIS[kind].invariants, *_every_kind(kind, limits))


def transitions_for(kind: str) -> tuple[Transition, ...]:
    """The update rules of the v1 kind ``kind``."""
    return (
        Transition(
            f"{KINDS[kind].short}-managed-by-immutable",
            kind,
            MANAGED_BY_IMMUTABLE,
            _MANAGED_BY_UNCHANGED_CEL,
            ".spec.runPolicy.managedBy",
            _check_managed_by_unchanged,
        ),
    )


#: Every rule of every v1 kind, with the default replica limits.
INVARIANTS: tuple[Rule, ...] = tuple(
    rule for kind in REPLICA_FIELDS for rule in invariants_for(kind)
)
#: Every update rule of every v1 kind.
TRANSITIONS: tuple[Transition, ...] = tuple(
    rule for kind in REPLICA_FIELDS for rule in transitions_for(kind)
)


def check_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Run the Python side of every update rule of ``kind`` (``old`` is the stored job)."""
    return run_transitions(transitions_for(kind), old, new)
