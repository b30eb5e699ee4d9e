"""The TrainJob's rules: what upstream Trainer v2.3.0 checks in its CRD's CEL and its
admission webhook, as far as the TrainJob alone decides it, plus the platform's node limit
(see :mod:`kubetrain.api.trainer.rules` for how a rule is stated)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubetrain.api.crd_generator import ITEMS
from kubetrain.api.errors import FieldError
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.names import GENERATED_SUFFIX, MAX_NAME, name_or_generated
from kubetrain.api.rules import Check, Rule
from kubetrain.api.trainer.constants import (
    ALL_RESERVED_ENV,
    DEFAULT_RUNTIME_KIND,
    ENV_OWNED_CONTAINERS,
    GROUP,
    MANAGED_BY_VALUES,
    RUNTIME_KINDS,
    TRAINJOB,
)
from kubetrain.api.trainer.rules import (
    full_match,
    nodes_check,
    nodes_message,
)
from kubetrain.api.wire import as_dict, as_int, as_list, at, items_at

# --- TrainJob --------------------------------------------------------------------------------

#: Suffixes of the pod hostnames kubetrain derives from a TrainJob's name (upstream's DNS
#: shape: ``<trainjob>-<replicated job>-<job index>-<pod index>``), other than the nodes'.
LAUNCHER_SUFFIX = "-launcher-0-0"
INITIALIZER_SUFFIXES = {
    "dataset": "-dataset-initializer-0-0",
    "model": "-model-initializer-0-0",
}
NODE_PREFIX = "-node-0-"

NAME_FITS = (
    "TrainJob name too long: every pod hostname '<name>-<step>-0-<index>' (node up to "
    "numNodes - 1, launcher, and the initializers the TrainJob configures) must fit a "
    f"{MAX_NAME}-character DNS-1035 label"
)


def _num_nodes(obj: dict[str, Any]) -> int:
    count = as_int(at(obj, "spec", "trainer", "numNodes"))
    return count if count is not None and count >= 1 else 1


def _check_name_fits(obj: dict[str, Any]) -> list[FieldError]:
    name = name_or_generated(obj)
    if name is None:
        return []
    generated = not isinstance(as_dict(obj.get("metadata")).get("name"), str) or not as_dict(
        obj.get("metadata")
    ).get("name")
    suffixes = [f"{NODE_PREFIX}{_num_nodes(obj) - 1}", LAUNCHER_SUFFIX]
    initializer = as_dict(at(obj, "spec", "initializer"))
    suffixes += [s for step, s in INITIALIZER_SUFFIXES.items() if step in initializer]
    longest = max((name + suffix for suffix in suffixes), key=len)
    if len(longest) <= MAX_NAME:
        return []
    room = max(len(name) - (len(longest) - MAX_NAME), 0)
    advice = (
        f"use a generateName of at most {max(room - GENERATED_SUFFIX, 0)} characters"
        if generated
        else f"use at most {room} characters"
    )
    return [
        FieldError(
            "metadata.name", f"{NAME_FITS} ({longest[:80]!r} has {len(longest)}); {advice}", name
        )
    ]


def _name_fits_cel() -> str:
    nodes = (
        "(has(self.spec.trainer) && has(self.spec.trainer.numNodes) && "
        "self.spec.trainer.numNodes > 1 ? self.spec.trainer.numNodes : 1)"
    )
    dataset = "has(self.spec.initializer) && has(self.spec.initializer.dataset)"
    model = "has(self.spec.initializer) && has(self.spec.initializer.model)"
    longest = (
        f"[{len(NODE_PREFIX)} + size(string({nodes} - 1)), {len(LAUNCHER_SUFFIX)}, "
        f"{dataset} ? {len(INITIALIZER_SUFFIXES['dataset'])} : 0, "
        f"{model} ? {len(INITIALIZER_SUFFIXES['model'])} : 0].max()"
    )
    return f"!has(self.metadata.name) || size(self.metadata.name) + {longest} <= {MAX_NAME}"


RUNTIME_REF = (
    f"runtimeRef must name a {' or a '.join(RUNTIME_KINDS)} of apiGroup {GROUP} (both may be "
    f"left out: kind then defaults to {DEFAULT_RUNTIME_KIND})"
)


def _check_runtime_ref(obj: dict[str, Any]) -> list[FieldError]:
    ref = as_dict(at(obj, "spec", "runtimeRef"))
    group, kind = ref.get("apiGroup"), ref.get("kind")
    wrong_group = isinstance(group, str) and group != GROUP
    wrong_kind = isinstance(kind, str) and kind not in RUNTIME_KINDS
    if wrong_group or wrong_kind:
        shown = {k: v for k, v in (("apiGroup", group), ("kind", kind)) if v is not None}
        return [FieldError("spec.runtimeRef", RUNTIME_REF, shown)]
    return []


_RUNTIME_REF_CEL = (
    f"(!has(self.apiGroup) || self.apiGroup == '{GROUP}') && "
    f"(!has(self.kind) || self.kind in [{', '.join(repr(k) for k in RUNTIME_KINDS)}])"
)

MANAGED_BY = (
    f"spec.managedBy must be one of: {', '.join(MANAGED_BY_VALUES)} (or left out: kubetrain "
    "then reconciles the TrainJob)"
)


def _check_managed_by(obj: dict[str, Any]) -> list[FieldError]:
    value = at(obj, "spec", "managedBy")
    if isinstance(value, str) and value not in MANAGED_BY_VALUES:
        return [FieldError("spec.managedBy", MANAGED_BY, value)]
    return []


# Upstream's own rule and words (its CRD's CEL), so scripts looking for them still match.
STORAGE_URI = "storageUri may be empty, or it must be a valid URI (scheme://...)"
_STORAGE_URI_RE = r"^[A-Za-z][A-Za-z0-9+.-]*://.+$"


def _storage_uri_check(step: str) -> Check:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        value = at(obj, "spec", "initializer", step, "storageUri")
        if isinstance(value, str) and value and not full_match(_STORAGE_URI_RE[1:-1], value):
            return [FieldError(f"spec.initializer.{step}.storageUri", STORAGE_URI, value)]
        return []

    return check


RESERVED_ENV = (
    "spec.trainer.env must not set a variable the runtime's framework injects: "
    f"{', '.join(ALL_RESERVED_ENV)}"
)


def _check_reserved_env(obj: dict[str, Any]) -> list[FieldError]:
    return [
        FieldError(f"spec.trainer.env[{index}].name", RESERVED_ENV, env.get("name"))
        for index, env in items_at(obj, "spec", "trainer", "env")
        if env.get("name") in ALL_RESERVED_ENV
    ]


_RESERVED_ENV_CEL = (
    f"self.all(e, !(e.name in [{', '.join(repr(name) for name in ALL_RESERVED_ENV)}]))"
)

PATCH_ENV = (
    "a runtime patch must not set env on the node, dataset-initializer or model-initializer "
    "container: use spec.trainer.env or spec.initializer.dataset/model.env"
)
_PATCHED_POD = ("trainingRuntimeSpec", "template", "spec")
_PATCH_CONTAINERS_NODE = (
    "spec",
    "runtimePatches",
    ITEMS,
    *_PATCHED_POD,
    "replicatedJobs",
    ITEMS,
    "template",
    "spec",
    "template",
    "spec",
    "containers",
    ITEMS,
)


def _patched_containers(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(wire path, container patch) of every container patch of every runtime patch."""
    for p, patch in items_at(obj, "spec", "runtimePatches"):
        for j, rjob in items_at(patch, *_PATCHED_POD, "replicatedJobs"):
            for c, container in items_at(
                rjob, "template", "spec", "template", "spec", "containers"
            ):
                path = (
                    f"spec.runtimePatches[{p}].trainingRuntimeSpec.template.spec."
                    f"replicatedJobs[{j}].template.spec.template.spec.containers[{c}]"
                )
                yield path, container


def _check_patch_env(obj: dict[str, Any]) -> list[FieldError]:
    return [
        FieldError(f"{path}.env", PATCH_ENV, container.get("name"))
        for path, container in _patched_containers(obj)
        if container.get("name") in ENV_OWNED_CONTAINERS and as_list(container.get("env"))
    ]


_PATCH_ENV_CEL = (
    f"!(self.name in [{', '.join(repr(n) for n in ENV_OWNED_CONTAINERS)}]) || "
    "!has(self.env) || size(self.env) == 0"
)

PATCH_MANAGER = (
    "runtimePatches[].manager must be a domain-prefixed path naming who owns the patch, "
    "such as example.com/platform-team"
)
# Kubernetes' IsDomainPrefixedPath: a DNS-1123 subdomain, '/', then a non-empty path.
_DOMAIN_PREFIXED_PATH = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$"
)


def _check_patch_manager(obj: dict[str, Any]) -> list[FieldError]:
    return [
        FieldError(f"spec.runtimePatches[{index}].manager", PATCH_MANAGER, patch["manager"])
        for index, patch in items_at(obj, "spec", "runtimePatches")
        if isinstance(patch.get("manager"), str)
        and not full_match(_DOMAIN_PREFIXED_PATH[1:-1], patch["manager"])
    ]


def trainjob_rules(limits: ReplicaLimits) -> list[Rule]:
    tj = (TRAINJOB,)
    return [
        Rule(
            "trainjob-name-fits",
            tj,
            NAME_FITS,
            _name_fits_cel(),
            (),
            _check_name_fits,
            ".metadata.name",
        ),
        Rule(
            "trainjob-runtime-ref",
            tj,
            RUNTIME_REF,
            _RUNTIME_REF_CEL,
            ("spec", "runtimeRef"),
            _check_runtime_ref,
        ),
        Rule(
            "trainjob-managed-by",
            tj,
            MANAGED_BY,
            f"self in [{', '.join(repr(v) for v in MANAGED_BY_VALUES)}]",
            ("spec", "managedBy"),
            _check_managed_by,
        ),
        *(
            Rule(
                f"trainjob-{step}-storage-uri",
                tj,
                STORAGE_URI,
                f"self == '' || self.matches('{_STORAGE_URI_RE}')",
                ("spec", "initializer", step, "storageUri"),
                _storage_uri_check(step),
            )
            for step in ("dataset", "model")
        ),
        Rule(
            "trainjob-reserved-env",
            tj,
            RESERVED_ENV,
            _RESERVED_ENV_CEL,
            ("spec", "trainer", "env"),
            _check_reserved_env,
        ),
        Rule(
            "trainjob-nodes-limit",
            tj,
            nodes_message(limits),
            f"!has(self.numNodes) || self.numNodes <= {limits.max_replicas_per_type}",
            ("spec", "trainer"),
            nodes_check(("spec", "trainer"), limits),
            ".numNodes",
        ),
        Rule(
            "trainjob-patch-manager",
            tj,
            PATCH_MANAGER,
            # A double-quoted CEL string: the pattern holds a single quote.
            'self.matches("' + _DOMAIN_PREFIXED_PATH.replace("\\", "\\\\") + '")',
            ("spec", "runtimePatches", ITEMS, "manager"),
            _check_patch_manager,
        ),
        Rule(
            "trainjob-patch-env",
            tj,
            PATCH_ENV,
            _PATCH_ENV_CEL,
            _PATCH_CONTAINERS_NODE,
            _check_patch_env,
            ".env",
        ),
    ]
