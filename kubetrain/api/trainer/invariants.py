"""The Trainer v2 kinds' cross-field rules, each stated twice with one message: as a CEL
rule in the CRD (the API server enforces it) and as a Python check ``kubetrain validate``
runs offline.

They are the rules upstream Kubeflow Trainer v2.3.0 checks in its CRDs' CEL and in its
admission webhooks, as far as they depend on the object alone (a webhook can also read
the referenced runtime; kubetrain has no webhook, see the README), plus the platform's
node limit. Each rule sits on a node of the CRD schema (``node``: the path of property
names from the root, ``[]`` for a list's items), where ``self`` is that node's value,
so the API server's message names the offending field; the Python check walks the whole
wire object and reports the same message at that field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import CelRule
from kubetrain.api.errors import FieldError, join_path
from kubetrain.api.invariants import Transition
from kubetrain.api.keys import MANAGED_BY_TRAINER
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.trainer.constants import (
    ALL_RESERVED_ENV,
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    CLUSTER_TRAINING_RUNTIME,
    DEFAULT_RUNTIME_API_GROUP,
    DEFAULT_RUNTIME_KIND,
    ENV_OWNED_CONTAINERS,
    GROUP,
    MANAGED_BY_VALUES,
    RUNTIME_KINDS,
    STEP_CONTAINERS,
    TRAINING_RUNTIME,
    TRAINJOB,
)

MAX_NAME = 63
ITEMS = "[]"
RUNTIMES = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)

Check = Callable[[dict[str, Any]], list[FieldError]]


@dataclass(frozen=True)
class Rule:
    """One rule of the ``kinds`` whose CRD carries it: ``cel`` at the schema ``node``
    (``self`` is the node's value), ``check`` on the whole wire object."""

    name: str
    kinds: tuple[str, ...]
    message: str
    cel: str
    node: tuple[str, ...]
    check: Check
    field_path: str | None = None

    def cel_rule(self) -> CelRule:
        return CelRule(rule=self.cel, message=self.message, field_path=self.field_path)


# --- walking the wire object ----------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _items(obj: Any, *keys: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, item) of the mapping items of the list at ``keys``."""
    for index, item in enumerate(_list(_at(obj, *keys))):
        if isinstance(item, dict):
            yield index, item


def _go_full_match(pattern: str, value: str) -> bool:
    # CEL's matches() is RE2: '.' stops at a newline and '$' is the end of the text.
    return re.fullmatch(pattern, value) is not None


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
_GENERATED_PREFIX, _GENERATED_SUFFIX = 58, 5


def _trainjob_name(obj: dict[str, Any]) -> str | None:
    meta = _dict(obj.get("metadata"))
    name, prefix = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        return name
    if isinstance(prefix, str) and prefix:
        # The server names it with at most 58 characters of the prefix and 5 random ones.
        return prefix[:_GENERATED_PREFIX] + "x" * _GENERATED_SUFFIX
    return None


def _num_nodes(obj: dict[str, Any]) -> int:
    count = _int(_at(obj, "spec", "trainer", "numNodes"))
    return count if count is not None and count >= 1 else 1


def _check_name_fits(obj: dict[str, Any]) -> list[FieldError]:
    name = _trainjob_name(obj)
    if name is None:
        return []
    generated = not isinstance(_dict(obj.get("metadata")).get("name"), str) or not _dict(
        obj.get("metadata")
    ).get("name")
    suffixes = [f"{NODE_PREFIX}{_num_nodes(obj) - 1}", LAUNCHER_SUFFIX]
    initializer = _dict(_at(obj, "spec", "initializer"))
    suffixes += [s for step, s in INITIALIZER_SUFFIXES.items() if step in initializer]
    longest = max((name + suffix for suffix in suffixes), key=len)
    if len(longest) <= MAX_NAME:
        return []
    room = max(len(name) - (len(longest) - MAX_NAME), 0)
    advice = (
        f"use a generateName of at most {max(room - _GENERATED_SUFFIX, 0)} characters"
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
    ref = _dict(_at(obj, "spec", "runtimeRef"))
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
    value = _at(obj, "spec", "managedBy")
    if isinstance(value, str) and value not in MANAGED_BY_VALUES:
        return [FieldError("spec.managedBy", MANAGED_BY, value)]
    return []


# Upstream's own rule and words (its CRD's CEL), so scripts looking for them still match.
STORAGE_URI = "storageUri may be empty, or it must be a valid URI (scheme://...)"
_STORAGE_URI_RE = r"^[A-Za-z][A-Za-z0-9+.-]*://.+$"


def _storage_uri_check(step: str) -> Check:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        value = _at(obj, "spec", "initializer", step, "storageUri")
        if isinstance(value, str) and value and not _go_full_match(_STORAGE_URI_RE[1:-1], value):
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
        for index, env in _items(obj, "spec", "trainer", "env")
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
    for p, patch in _items(obj, "spec", "runtimePatches"):
        for j, rjob in _items(patch, *_PATCHED_POD, "replicatedJobs"):
            for c, container in _items(rjob, "template", "spec", "template", "spec", "containers"):
                path = (
                    f"spec.runtimePatches[{p}].trainingRuntimeSpec.template.spec."
                    f"replicatedJobs[{j}].template.spec.template.spec.containers[{c}]"
                )
                yield path, container


def _check_patch_env(obj: dict[str, Any]) -> list[FieldError]:
    return [
        FieldError(f"{path}.env", PATCH_ENV, container.get("name"))
        for path, container in _patched_containers(obj)
        if container.get("name") in ENV_OWNED_CONTAINERS and _list(container.get("env"))
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
        for index, patch in _items(obj, "spec", "runtimePatches")
        if isinstance(patch.get("manager"), str)
        and not _go_full_match(_DOMAIN_PREFIXED_PATH[1:-1], patch["manager"])
    ]


def nodes_message(limits: ReplicaLimits) -> str:
    """The rejection message of the node limit (shared by CEL and Python)."""
    return (
        f"numNodes must be at most {limits.max_replicas_per_type} (the cluster's limit on "
        "replicas of one replica type, set in the job CRDs by the platform team)"
    )


def _nodes_check(keys: tuple[str, ...], limits: ReplicaLimits) -> Check:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        count = _int(_at(obj, *keys, "numNodes"))
        if count is not None and count > limits.max_replicas_per_type:
            return [FieldError(f"{'.'.join(keys)}.numNodes", nodes_message(limits), count)]
        return []

    return check


def _trainjob_rules(limits: ReplicaLimits) -> list[Rule]:
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
            _nodes_check(("spec", "trainer"), limits),
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


# --- TrainJob updates ----------------------------------------------------------------------------


def _immutable_message(field: str) -> str:
    return (
        f"spec.{field} is immutable: it cannot be set, changed or removed once the TrainJob exists"
    )


def _unchanged_check(
    field: str, default: Any = None, message: str | None = None
) -> Callable[..., list[FieldError]]:
    def check(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
        before, after = _at(old, "spec", field), _at(new, "spec", field)
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
    ref = _dict(ref)
    return (
        ref.get("name"),
        ref.get("apiGroup", DEFAULT_RUNTIME_API_GROUP),
        ref.get("kind", DEFAULT_RUNTIME_KIND),
    )


def _check_runtime_ref_unchanged(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    before, after = _at(old, "spec", "runtimeRef"), _at(new, "spec", "runtimeRef")
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
    "before or after the update)"
)


def _suspended(obj: dict[str, Any]) -> bool:
    return _at(obj, "spec", "suspend") is True


def _check_patches_while_suspended(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    before = _at(old, "spec", "runtimePatches") or []
    after = _at(new, "spec", "runtimePatches") or []
    if before != after and not (_suspended(old) or _suspended(new)):
        return [FieldError("spec.runtimePatches", PATCHES_WHILE_SUSPENDED)]
    return []


def _patches_cel(root: str) -> str:
    return f"(has({root}.spec.runtimePatches) ? {root}.spec.runtimePatches : [])"


def _suspended_cel(root: str) -> str:
    return f"(has({root}.spec.suspend) && {root}.spec.suspend)"


def _trainjob_transitions() -> list[Transition]:
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
            f"{_suspended_cel('self')} || {_suspended_cel('oldSelf')}",
            ".spec.runtimePatches",
            _check_patches_while_suspended,
        ),
    ]
    return rules


# --- TrainingRuntime and ClusterTrainingRuntime ----------------------------------------------

_FRAMEWORKS = ("torch", "mpi", "jax", "xgboost", "flux")
ONE_FRAMEWORK = (
    f"mlPolicy may configure at most one framework: {', '.join(_FRAMEWORKS[:-1])} or "
    f"{_FRAMEWORKS[-1]}"
)


def _check_one_framework(obj: dict[str, Any]) -> list[FieldError]:
    policy = _dict(_at(obj, "spec", "mlPolicy"))
    present = [name for name in _FRAMEWORKS if name in policy]
    if len(present) > 1:
        return [FieldError("spec.mlPolicy", ONE_FRAMEWORK, present)]
    return []


ONE_POD_GROUP_POLICY = "podGroupPolicy may configure coscheduling or volcano, not both"


def _check_one_pod_group_policy(obj: dict[str, Any]) -> list[FieldError]:
    policy = _dict(_at(obj, "spec", "podGroupPolicy"))
    if "coscheduling" in policy and "volcano" in policy:
        return [FieldError("spec.podGroupPolicy", ONE_POD_GROUP_POLICY, sorted(policy))]
    return []


_STEPS = tuple(STEP_CONTAINERS)
ANCESTOR_REPLICAS = (
    f"a replicatedJob labelled {ANCESTOR_LABEL} ({', '.join(_STEPS)}) must have replicas 1 "
    "(a TrainJob sets the trainer's node count with numNodes)"
)
ANCESTOR_CONTAINER = (
    f"a replicatedJob labelled {ANCESTOR_LABEL} must have its step's container: node for "
    f"{ANCESTOR_TRAINER}, dataset-initializer and model-initializer for those steps"
)
_RJOBS = ("spec", "template", "spec", "replicatedJobs")
_RJOB_PATH = "spec.template.spec.replicatedJobs"


def _step(rjob: dict[str, Any]) -> str | None:
    step = _at(rjob, "template", "metadata", "labels", ANCESTOR_LABEL)
    return step if isinstance(step, str) and step in STEP_CONTAINERS else None


def _check_ancestor_replicas(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for index, rjob in _items(obj, *_RJOBS):
        replicas = _int(rjob.get("replicas"))
        if _step(rjob) is not None and replicas is not None and replicas != 1:
            errors.append(
                FieldError(f"{_RJOB_PATH}[{index}].replicas", ANCESTOR_REPLICAS, replicas)
            )
    return errors


def _check_ancestor_container(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for index, rjob in _items(obj, *_RJOBS):
        step = _step(rjob)
        if step is None:
            continue
        containers = _list(_at(rjob, "template", "spec", "template", "spec", "containers"))
        names = [c.get("name") for c in containers if isinstance(c, dict)]
        if STEP_CONTAINERS[step] not in names:
            path = f"{_RJOB_PATH}[{index}].template.spec.template.spec.containers"
            errors.append(FieldError(path, ANCESTOR_CONTAINER, names))
    return errors


_LABELS = "self.template.metadata.labels"
_IS_STEP = (
    f"has(self.template.metadata) && has({_LABELS}) && '{ANCESTOR_LABEL}' in {_LABELS} && "
    f"{_LABELS}['{ANCESTOR_LABEL}'] in [{', '.join(repr(s) for s in _STEPS)}]"
)
_POD = "self.template.spec.template.spec"
# One test per step against constant names: comparing a container name with the label's
# value (a string of unbounded length) costs too much for the API server's estimate.
_HAS_STEP_CONTAINER = (
    " : ".join(
        f"{_LABELS}['{ANCESTOR_LABEL}'] == '{step}' ? "
        f"{_POD}.containers.exists(c, c.name == '{container}')"
        for step, container in STEP_CONTAINERS.items()
    )
    + " : false"
)
_ANCESTOR_CONTAINER_CEL = (
    f"!({_IS_STEP}) || (has(self.template.spec) && has(self.template.spec.template) && "
    f"has({_POD}) && ({_HAS_STEP_CONTAINER}))"
)

# Upstream's own rule and words (its CRD's CEL).
ENV_INJECTION_NOT_NODE = (
    "containerNames must not include the main node container because PET_* envs are always "
    "injected into it"
)


def _check_env_injection(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    keys = ("spec", "mlPolicy", "torch", "envInjection", "targets")
    for index, target in _items(obj, *keys):
        names = _list(target.get("containerNames"))
        if "node" in names:
            path = f"spec.mlPolicy.torch.envInjection.targets[{index}].containerNames"
            errors.append(FieldError(path, ENV_INJECTION_NOT_NODE, names))
    return errors


DEPENDS_ON_EARLIER = (
    "dependsOn must name a replicatedJob listed before this one (JobSet's rule: jobs start in "
    "the order they are listed)"
)


def _check_depends_on(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    rjobs = list(_items(obj, *_RJOBS))
    names = [rjob.get("name") for _, rjob in rjobs]
    for position, (index, rjob) in enumerate(rjobs):
        for d, dependency in _items(rjob, "dependsOn"):
            if dependency.get("name") not in names[:position]:
                path = f"{_RJOB_PATH}[{index}].dependsOn[{d}].name"
                errors.append(FieldError(path, DEPENDS_ON_EARLIER, dependency.get("name")))
    return errors


# Two-variable comprehensions (index, value): an earlier job is one of a lower index.
_DEPENDS_ON_CEL = (
    "!has(self.replicatedJobs) || self.replicatedJobs.all(i, r, !has(r.dependsOn) || "
    "r.dependsOn.all(d, self.replicatedJobs.exists(j, p, j < i && p.name == d.name)))"
)

# Upstream's (JobSet's) own rule and words.
STARTUP_POLICY_OR_DEPENDS_ON = "StartupPolicy and DependsOn APIs are mutually exclusive"


def _check_startup_policy(obj: dict[str, Any]) -> list[FieldError]:
    in_order = _at(obj, "spec", "template", "spec", "startupPolicy", "startupPolicyOrder")
    if in_order == "InOrder" and any("dependsOn" in rjob for _, rjob in _items(obj, *_RJOBS)):
        return [FieldError("spec.template.spec", STARTUP_POLICY_OR_DEPENDS_ON)]
    return []


_STARTUP_POLICY_CEL = (
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "has(self.replicatedJobs) && self.replicatedJobs.exists(x, has(x.dependsOn)))"
)

# Upstream's (JobSet's) own rule and words.
CLAIM_NAMESPACE = "namespace cannot be set for VolumeClaimPolicies templates"


def _check_claim_namespace(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for index, policy in _items(obj, "spec", "template", "spec", "volumeClaimPolicies"):
        for t, template in _items(policy, "templates"):
            namespace = _at(template, "metadata", "namespace")
            if isinstance(namespace, str) and namespace:
                path = (
                    f"spec.template.spec.volumeClaimPolicies[{index}].templates[{t}]"
                    ".metadata.namespace"
                )
                errors.append(FieldError(path, CLAIM_NAMESPACE, namespace))
    return errors


_CLAIM_NAMESPACE_CEL = (
    "!has(self.templates) || self.templates.all(t, !has(t.metadata) || "
    "!has(t.metadata.namespace) || size(t.metadata.namespace) == 0)"
)


def _runtime_rules(limits: ReplicaLimits) -> list[Rule]:
    return [
        Rule(
            "runtime-one-framework",
            RUNTIMES,
            ONE_FRAMEWORK,
            f"[{', '.join(f'has(self.{f})' for f in _FRAMEWORKS)}].filter(x, x).size() <= 1",
            ("spec", "mlPolicy"),
            _check_one_framework,
        ),
        Rule(
            "runtime-nodes-limit",
            RUNTIMES,
            nodes_message(limits),
            f"!has(self.numNodes) || self.numNodes <= {limits.max_replicas_per_type}",
            ("spec", "mlPolicy"),
            _nodes_check(("spec", "mlPolicy"), limits),
            ".numNodes",
        ),
        Rule(
            "runtime-env-injection-not-node",
            RUNTIMES,
            ENV_INJECTION_NOT_NODE,
            "!self.exists(c, c == 'node')",
            ("spec", "mlPolicy", "torch", "envInjection", "targets", ITEMS, "containerNames"),
            _check_env_injection,
        ),
        Rule(
            "runtime-one-pod-group-policy",
            RUNTIMES,
            ONE_POD_GROUP_POLICY,
            "!(has(self.coscheduling) && has(self.volcano))",
            ("spec", "podGroupPolicy"),
            _check_one_pod_group_policy,
        ),
        Rule(
            "runtime-ancestor-replicas",
            RUNTIMES,
            ANCESTOR_REPLICAS,
            f"!({_IS_STEP}) || !has(self.replicas) || self.replicas == 1",
            (*_RJOBS, ITEMS),
            _check_ancestor_replicas,
            ".replicas",
        ),
        Rule(
            "runtime-ancestor-container",
            RUNTIMES,
            ANCESTOR_CONTAINER,
            _ANCESTOR_CONTAINER_CEL,
            (*_RJOBS, ITEMS),
            _check_ancestor_container,
            ".template.spec.template.spec.containers",
        ),
        Rule(
            "runtime-depends-on-earlier",
            RUNTIMES,
            DEPENDS_ON_EARLIER,
            _DEPENDS_ON_CEL,
            ("spec", "template", "spec"),
            _check_depends_on,
            ".replicatedJobs",
        ),
        Rule(
            "runtime-startup-policy-or-depends-on",
            RUNTIMES,
            STARTUP_POLICY_OR_DEPENDS_ON,
            _STARTUP_POLICY_CEL,
            ("spec", "template", "spec"),
            _check_startup_policy,
        ),
        Rule(
            "runtime-claim-namespace",
            RUNTIMES,
            CLAIM_NAMESPACE,
            _CLAIM_NAMESPACE_CEL,
            ("spec", "template", "spec", "volumeClaimPolicies", ITEMS),
            _check_claim_namespace,
        ),
    ]


# --- the tables --------------------------------------------------------------------------------


def rules_for(kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS) -> tuple[Rule, ...]:
    """Every rule of ``kind`` (TrainJob, TrainingRuntime, ClusterTrainingRuntime)."""
    rules = [*_trainjob_rules(limits), *_runtime_rules(limits)]
    return tuple(rule for rule in rules if kind in rule.kinds)


def transitions_for(kind: str) -> tuple[Transition, ...]:
    """The update rules of ``kind`` (runtimes have none: a runtime change applies to the
    TrainJobs created after it)."""
    return tuple(_trainjob_transitions()) if kind == TRAINJOB else ()


KINDS = (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)
#: Every rule, with the default limits (a runtime rule once, though both runtimes have it).
RULES: tuple[Rule, ...] = (
    *_trainjob_rules(DEFAULT_REPLICA_LIMITS),
    *_runtime_rules(DEFAULT_REPLICA_LIMITS),
)
TRANSITIONS: tuple[Transition, ...] = transitions_for(TRAINJOB)


def check_rules(
    kind: str, obj: dict[str, Any], limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> list[FieldError]:
    """Run the Python side of every rule of ``kind`` on a raw wire object."""
    errors: list[FieldError] = []
    for rule in rules_for(kind, limits):
        errors.extend(rule.check(obj))
    return errors


def check_trainer_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Run the Python side of every update rule of ``kind`` (``old`` is the stored object)."""
    errors: list[FieldError] = []
    for rule in transitions_for(kind):
        errors.extend(rule.check(old, new))
    return errors


def node_path(node: tuple[str, ...]) -> str:
    """A rule's node as the API server names fields (list items without an index)."""
    return join_path([part for part in node if part != ITEMS])
