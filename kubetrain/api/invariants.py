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
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import CelRule
from kubetrain.api.errors import FieldError
from kubetrain.api.keys import MANAGED_BY_VALUES
from kubetrain.api.kinds import KINDS
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits

MAX_NAME = 63

#: Replica types of each kind, in their canonical spelling (the kinds table's).
REPLICA_TYPES: dict[str, tuple[str, ...]] = {k: i.replica_types for k, i in KINDS.items()}
#: Kinds whose replica types upstream accepts in any letter case and normalises
#: (training-operator's TFJob defaulter; its PyTorchJob webhook refuses other spellings).
CASE_INSENSITIVE_KINDS = frozenset(k for k, i in KINDS.items() if i.case_insensitive_replica_types)
#: Wire field holding each kind's replica specs.
REPLICA_FIELDS = {k: i.replica_specs_field for k, i in KINDS.items()}
#: The container upstream requires in every replica (and injects its environment into).
MAIN_CONTAINERS = {k: i.main_container for k, i in KINDS.items() if i.main_container}


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
    check: Callable[[dict[str, Any]], list[FieldError]]
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


def replica_type_message(kind: str) -> str:
    """The message for a replica type the kind does not have."""
    names = ", ".join(REPLICA_TYPES[kind])
    if kind in CASE_INSENSITIVE_KINDS:
        return f"replica type must be one of: {names} (in any letter case)"
    return f"replica type must be one of: {names}"


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _specs(obj: dict[str, Any], field: str) -> dict[str, Any]:
    specs = _spec(obj).get(field)
    return specs if isinstance(specs, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replicas(replica_spec: Any, default: int = 1) -> int | None:
    """The replica count, ``default`` when absent, None when not a count (not an int, or
    negative: the schema reports those)."""
    if not isinstance(replica_spec, dict):
        return None
    count = _int(replica_spec.get("replicas", default))
    return count if count is not None and count >= 0 else None


def _containers(replica_spec: Any) -> list[Any] | None:
    """The template's containers, None when the template has none or is malformed."""
    template = replica_spec.get("template") if isinstance(replica_spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    return containers if isinstance(containers, list) else None


def _cel_replicas(specs: str, rtype: str) -> str:
    ref = f"{specs}[{rtype}]"
    return f"(has({ref}.replicas) ? {ref}.replicas : 1)"


def _present(field: str, rtype: str) -> str:
    return f"has(self.spec.{field}) && '{rtype}' in self.spec.{field}"


# --- replica types --------------------------------------------------------------------------


def _replica_type_invariant(kind: str) -> Invariant:
    field = REPLICA_FIELDS[kind]
    message = replica_type_message(kind)
    allowed = REPLICA_TYPES[kind]
    folded = kind in CASE_INSENSITIVE_KINDS

    def check(obj: dict[str, Any]) -> list[FieldError]:
        wanted = {t.lower() for t in allowed} if folded else set(allowed)
        return [
            FieldError(f"spec.{field}.{key}", message, key)
            for key in _specs(obj, field)
            if (str(key).lower() if folded else key) not in wanted
        ]

    if folded:
        listed = ", ".join(f"'{t.lower()}'" for t in allowed)
        rule = f"!has(self.spec.{field}) || self.spec.{field}.all(k, k.lowerAscii() in [{listed}])"
    else:
        listed = ", ".join(f"'{t}'" for t in allowed)
        rule = f"!has(self.spec.{field}) || self.spec.{field}.all(k, k in [{listed}])"
    return Invariant(f"{_prefix(kind)}-replica-types", kind, message, rule, f".spec.{field}", check)


TF_REPLICA_TYPES_DISTINCT = (
    "replica types must differ in more than letter case (not both 'worker' and 'Worker')"
)


def _check_tf_distinct(obj: dict[str, Any]) -> list[FieldError]:
    seen: dict[str, str] = {}
    errors = []
    for key in _specs(obj, _TF):
        folded = str(key).lower()
        if folded in seen:
            errors.append(FieldError(f"spec.{_TF}.{key}", TF_REPLICA_TYPES_DISTINCT, key))
        seen.setdefault(folded, key)
    return errors


# --- PyTorchJob -------------------------------------------------------------------------

_PT = "pytorchReplicaSpecs"
PYTORCH_ONE_MASTER = (
    "a PyTorchJob's Master must have exactly 1 replica (leave Master out for Workers only)"
)


def _check_pytorch_master(obj: dict[str, Any]) -> list[FieldError]:
    specs = _specs(obj, _PT)
    count = _replicas(specs["Master"]) if "Master" in specs else None
    if count is not None and count != 1:
        return [FieldError(f"spec.{_PT}.Master.replicas", PYTORCH_ONE_MASTER, count)]
    return []


PYTORCH_WORKER_AT_LEAST_ONE = (
    "a PyTorchJob's Worker must have at least 1 replica (leave Worker out for a Master only)"
)


def _check_pytorch_worker(obj: dict[str, Any]) -> list[FieldError]:
    specs = _specs(obj, _PT)
    count = _replicas(specs["Worker"]) if "Worker" in specs else None
    if count is not None and count < 1:
        return [FieldError(f"spec.{_PT}.Worker.replicas", PYTORCH_WORKER_AT_LEAST_ONE, count)]
    return []


PYTORCH_ELASTIC_NEEDS_WORKER = "elasticPolicy needs a Worker replica spec"


def _check_pytorch_elastic_worker(obj: dict[str, Any]) -> list[FieldError]:
    has_elastic = _spec(obj).get("elasticPolicy") is not None
    if has_elastic and "Worker" not in _specs(obj, _PT):
        return [FieldError(f"spec.{_PT}", PYTORCH_ELASTIC_NEEDS_WORKER, kind="required")]
    return []


PYTORCH_ELASTIC_BOUNDS = "elasticPolicy.minReplicas must be <= elasticPolicy.maxReplicas"


def _check_pytorch_elastic_bounds(obj: dict[str, Any]) -> list[FieldError]:
    policy = _spec(obj).get("elasticPolicy")
    if isinstance(policy, dict):
        low, high = _int(policy.get("minReplicas")), _int(policy.get("maxReplicas"))
        if low is not None and high is not None and low > high:
            return [FieldError("spec.elasticPolicy.minReplicas", PYTORCH_ELASTIC_BOUNDS, low)]
    return []


PYTORCH_NPROC_ONCE = "set spec.nprocPerNode or the deprecated elasticPolicy.nProcPerNode, not both"


def _check_pytorch_nproc(obj: dict[str, Any]) -> list[FieldError]:
    spec = _spec(obj)
    policy = spec.get("elasticPolicy")
    if isinstance(policy, dict) and "nProcPerNode" in policy and "nprocPerNode" in spec:
        return [
            FieldError(
                "spec.elasticPolicy.nProcPerNode", PYTORCH_NPROC_ONCE, policy["nProcPerNode"]
            )
        ]
    return []


# --- TFJob ------------------------------------------------------------------------------

_TF = "tfReplicaSpecs"
TF_ONE_CHIEF = "a TFJob has at most one Chief or Master replica in total"
_CHIEFS = ("chief", "master")


def _check_tf_chief(obj: dict[str, Any]) -> list[FieldError]:
    specs = _specs(obj, _TF)
    chiefs = {key: _replicas(rspec) for key, rspec in specs.items() if key.lower() in _CHIEFS}
    if sum(count or 0 for count in chiefs.values()) > 1:
        return [FieldError(f"spec.{_TF}", TF_ONE_CHIEF, chiefs)]
    return []


def _tf_chief_cel() -> str:
    specs = f"self.spec.{_TF}"
    is_chief = "k.lowerAscii() in ['chief', 'master']"
    count = _cel_replicas(specs, "k")
    # The total of Chief and Master replicas is at most one: at most one of them asks for
    # any, and none asks for more than one.
    return (
        f"!has({specs}) || ({specs}.filter(k, {is_chief} && {count} > 0).size() <= 1 && "
        f"{specs}.all(k, !({is_chief}) || {count} <= 1))"
    )


# --- MPIJob -----------------------------------------------------------------------------

_MPI = "mpiReplicaSpecs"
MPI_ONE_LAUNCHER = "an MPIJob needs exactly one Launcher replica"
MPI_NEEDS_WORKER = (
    "an MPIJob needs a Worker replica spec with at least one replica "
    "(or no Worker at all with runLauncherAsWorker: true)"
)
MPI_RESTART_POLICY = (
    "an MPIJob's restartPolicy must be Never or OnFailure (as upstream's mpi-operator: "
    "its launcher is a batch Job, whose pods cannot use Always or ExitCode)"
)


def _check_mpi_launcher(obj: dict[str, Any]) -> list[FieldError]:
    specs = _specs(obj, _MPI)
    if "Launcher" not in specs:
        return [FieldError(f"spec.{_MPI}.Launcher", MPI_ONE_LAUNCHER, kind="required")]
    count = _replicas(specs["Launcher"])
    if count is not None and count != 1:
        return [FieldError(f"spec.{_MPI}.Launcher.replicas", MPI_ONE_LAUNCHER, count)]
    return []


def _check_mpi_worker(obj: dict[str, Any]) -> list[FieldError]:
    specs = _specs(obj, _MPI)
    if "Worker" not in specs:
        if _spec(obj).get("runLauncherAsWorker") is True:
            return []
        return [FieldError(f"spec.{_MPI}.Worker", MPI_NEEDS_WORKER, kind="required")]
    count = _replicas(specs["Worker"])
    if count is not None and count < 1:
        return [FieldError(f"spec.{_MPI}.Worker.replicas", MPI_NEEDS_WORKER, count)]
    return []


def _check_mpi_restart(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for rtype, rspec in _specs(obj, _MPI).items():
        policy = rspec.get("restartPolicy") if isinstance(rspec, dict) else None
        if policy is not None and policy not in ("Never", "OnFailure"):
            errors.append(
                FieldError(f"spec.{_MPI}.{rtype}.restartPolicy", MPI_RESTART_POLICY, policy)
            )
    return errors


# --- every kind: pod templates -----------------------------------------------------------

NEEDS_CONTAINERS = "a replica's pod template must have at least one container"
NEEDS_IMAGE = "every container must have an image"


def _main_container_message(kind: str) -> str:
    # Upstream's own words, so that scripts looking for them still find them.
    return f"must have at least one container with name {MAIN_CONTAINERS[kind]}"


def _containers_check(field: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        errors = []
        for rtype, rspec in _specs(obj, field).items():
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
        for rtype, rspec in _specs(obj, field).items():
            for index, container in enumerate(_containers(rspec) or []):
                if isinstance(container, dict) and container.get("image") in (None, ""):
                    path = f"spec.{field}.{rtype}.template.spec.containers[{index}].image"
                    errors.append(FieldError(path, NEEDS_IMAGE, kind="required"))
        return errors

    return check


def _main_container_check(kind: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    field, name, message = (
        REPLICA_FIELDS[kind],
        MAIN_CONTAINERS[kind],
        _main_container_message(kind),
    )

    def check(obj: dict[str, Any]) -> list[FieldError]:
        errors = []
        for rtype, rspec in _specs(obj, field).items():
            containers = _containers(rspec)
            if not containers:
                continue  # no containers at all: NEEDS_CONTAINERS or the schema says so
            names = [c.get("name") for c in containers if isinstance(c, dict)]
            if name not in names:
                path = f"spec.{field}.{rtype}.template.spec.containers"
                errors.append(FieldError(path, message))
        return errors

    return check


_HAS_CONTAINERS = "has(self.template.spec) && has(self.template.spec.containers)"


# --- every kind: runPolicy.managedBy ---------------------------------------------------------

MANAGED_BY = (
    f"runPolicy.managedBy must be one of: {', '.join(MANAGED_BY_VALUES)} "
    "(or left out: kubetrain then reconciles the job)"
)
MANAGED_BY_IMMUTABLE = (
    "runPolicy.managedBy is immutable: it cannot be set, changed or removed once the job exists"
)


def _managed_by(obj: dict[str, Any]) -> Any:
    policy = _spec(obj).get("runPolicy")
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
        for rtype, rspec in _specs(obj, field).items():
            count = _replicas(rspec)
            if count is not None and count > limits.max_replicas_per_type:
                path = f"spec.{field}.{rtype}.replicas"
                errors.append(FieldError(path, limits.per_type_message(), count))
        return errors

    return check


def _per_job_check(
    field: str, limits: ReplicaLimits
) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        counts = [_replicas(rspec) for rspec in _specs(obj, field).values()]
        total = sum(count for count in counts if count is not None)
        if total > limits.max_pods_per_job:
            return [FieldError(f"spec.{field}", limits.per_job_message(), total)]
        return []

    return check


def _per_job_cel(field: str, limits: ReplicaLimits) -> str:
    specs = f"self.spec.{field}"
    return (
        f"!has({specs}) || {specs}.map(rt, {_cel_replicas(specs, 'rt')}).sum() <= "
        f"{limits.max_pods_per_job}"
    )


# --- every kind: child names must be DNS-1035 labels --------------------------------------

NAME_FITS = (
    "job name too long: every child '<name>-<replica type>-<index>' must fit a "
    f"{MAX_NAME}-character DNS-1035 label"
)
# The API server names a job with only generateName with at most 58 characters of it and 5
# random ones.
_GENERATED_PREFIX = 58
_GENERATED_SUFFIX = 5


def _job_name(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    name, prefix = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        return name
    if isinstance(prefix, str) and prefix:
        return prefix[:_GENERATED_PREFIX] + "x" * _GENERATED_SUFFIX
    return None


def _name_check(field: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        name = _job_name(obj)
        if name is None:
            return []
        longest = ""
        for rtype, rspec in _specs(obj, field).items():
            count = _replicas(rspec)
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


def _prefix(kind: str) -> str:
    return {"PyTorchJob": "pytorch", "TFJob": "tf", "MPIJob": "mpi"}[kind]


def _every_kind(kind: str, limits: ReplicaLimits) -> list[Invariant]:
    field, prefix = REPLICA_FIELDS[kind], _prefix(kind)
    return [
        _replica_type_invariant(kind),
        Invariant(
            f"{prefix}-containers",
            kind,
            NEEDS_CONTAINERS,
            f"{_HAS_CONTAINERS} && size(self.template.spec.containers) > 0",
            ".template",
            _containers_check(field),
            REPLICA,
        ),
        Invariant(
            f"{prefix}-images",
            kind,
            NEEDS_IMAGE,
            f"!({_HAS_CONTAINERS}) || "
            "self.template.spec.containers.all(c, has(c.image) && size(c.image) > 0)",
            ".template.spec.containers",
            _images_check(field),
            REPLICA,
        ),
        Invariant(
            f"{prefix}-managed-by",
            kind,
            MANAGED_BY,
            _MANAGED_BY_CEL,
            ".spec.runPolicy.managedBy",
            _check_managed_by,
        ),
        Invariant(
            f"{prefix}-replicas-per-type",
            kind,
            limits.per_type_message(),
            f"!has(self.replicas) || self.replicas <= {limits.max_replicas_per_type}",
            ".replicas",
            _per_type_check(field, limits),
            REPLICA,
        ),
        Invariant(
            f"{prefix}-pods-per-job",
            kind,
            limits.per_job_message(),
            _per_job_cel(field, limits),
            f".spec.{field}",
            _per_job_check(field, limits),
        ),
        Invariant(
            f"{prefix}-name-fits",
            kind,
            NAME_FITS,
            _name_cel(field),
            ".metadata.name",
            _name_check(field),
        ),
    ]


def _main_container_invariant(kind: str) -> Invariant:
    name = MAIN_CONTAINERS[kind]
    return Invariant(
        f"{_prefix(kind)}-main-container",
        kind,
        _main_container_message(kind),
        f"{_HAS_CONTAINERS} && self.template.spec.containers.exists(c, c.name == '{name}')",
        ".template",
        _main_container_check(kind),
        REPLICA,
    )


def _kind_specific() -> list[Invariant]:
    master = _cel_replicas(f"self.spec.{_PT}", "'Master'")
    worker = _cel_replicas(f"self.spec.{_PT}", "'Worker'")
    launcher = _cel_replicas(f"self.spec.{_MPI}", "'Launcher'")
    mpi_worker = _cel_replicas(f"self.spec.{_MPI}", "'Worker'")
    return [
        Invariant(
            "pytorch-one-master",
            "PyTorchJob",
            PYTORCH_ONE_MASTER,
            f"!({_present(_PT, 'Master')}) || {master} == 1",
            f".spec.{_PT}",
            _check_pytorch_master,
        ),
        Invariant(
            "pytorch-worker-at-least-one",
            "PyTorchJob",
            PYTORCH_WORKER_AT_LEAST_ONE,
            f"!({_present(_PT, 'Worker')}) || {worker} >= 1",
            f".spec.{_PT}",
            _check_pytorch_worker,
        ),
        _main_container_invariant("PyTorchJob"),
        Invariant(
            "pytorch-elastic-needs-worker",
            "PyTorchJob",
            PYTORCH_ELASTIC_NEEDS_WORKER,
            f"!has(self.spec.elasticPolicy) || ({_present(_PT, 'Worker')})",
            f".spec.{_PT}",
            _check_pytorch_elastic_worker,
        ),
        Invariant(
            "pytorch-elastic-bounds",
            "PyTorchJob",
            PYTORCH_ELASTIC_BOUNDS,
            "!has(self.spec.elasticPolicy) || !has(self.spec.elasticPolicy.minReplicas) || "
            "!has(self.spec.elasticPolicy.maxReplicas) || "
            "self.spec.elasticPolicy.minReplicas <= self.spec.elasticPolicy.maxReplicas",
            ".spec.elasticPolicy.minReplicas",
            _check_pytorch_elastic_bounds,
        ),
        Invariant(
            "pytorch-nproc-once",
            "PyTorchJob",
            PYTORCH_NPROC_ONCE,
            "!has(self.spec.elasticPolicy) || !has(self.spec.elasticPolicy.nProcPerNode) || "
            "!has(self.spec.nprocPerNode)",
            ".spec.elasticPolicy.nProcPerNode",
            _check_pytorch_nproc,
        ),
        Invariant(
            "tf-replica-types-distinct",
            "TFJob",
            TF_REPLICA_TYPES_DISTINCT,
            f"!has(self.spec.{_TF}) || self.spec.{_TF}.all(k, "
            f"self.spec.{_TF}.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",
            f".spec.{_TF}",
            _check_tf_distinct,
        ),
        _main_container_invariant("TFJob"),
        Invariant(
            "tf-one-chief", "TFJob", TF_ONE_CHIEF, _tf_chief_cel(), f".spec.{_TF}", _check_tf_chief
        ),
        Invariant(
            "mpi-one-launcher",
            "MPIJob",
            MPI_ONE_LAUNCHER,
            f"({_present(_MPI, 'Launcher')}) && {launcher} == 1",
            f".spec.{_MPI}",
            _check_mpi_launcher,
        ),
        Invariant(
            "mpi-needs-worker",
            "MPIJob",
            MPI_NEEDS_WORKER,
            f"({_present(_MPI, 'Worker')}) ? {mpi_worker} >= 1 : "
            "(has(self.spec.runLauncherAsWorker) && self.spec.runLauncherAsWorker)",
            f".spec.{_MPI}",
            _check_mpi_worker,
        ),
        Invariant(
            "mpi-restart-policy",
            "MPIJob",
            MPI_RESTART_POLICY,
            "!has(self.restartPolicy) || self.restartPolicy in ['Never', 'OnFailure']",
            ".restartPolicy",
            _check_mpi_restart,
            REPLICA,
        ),
    ]


def invariants_for(
    kind: str, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> tuple[Invariant, ...]:
    """Every invariant of ``kind``, the replica limits being ``limits``."""
    rules = [*_kind_specific(), *_every_kind(kind, limits)]
    return tuple(rule for rule in rules if rule.kind == kind)


def transitions_for(kind: str) -> tuple[Transition, ...]:
    """The update rules of ``kind``."""
    return (
        Transition(
            f"{_prefix(kind)}-managed-by-immutable",
            kind,
            MANAGED_BY_IMMUTABLE,
            _MANAGED_BY_UNCHANGED_CEL,
            ".spec.runPolicy.managedBy",
            _check_managed_by_unchanged,
        ),
    )


#: Every invariant of every kind, with the default replica limits.
INVARIANTS: tuple[Invariant, ...] = tuple(
    rule for kind in REPLICA_FIELDS for rule in invariants_for(kind)
)
#: Every update rule of every kind.
TRANSITIONS: tuple[Transition, ...] = tuple(
    rule for kind in REPLICA_FIELDS for rule in transitions_for(kind)
)


def check_invariants(
    kind: str, obj: dict[str, Any], limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> list[FieldError]:
    """Run the Python side of every invariant of ``kind`` on a raw wire object."""
    errors: list[FieldError] = []
    for invariant in invariants_for(kind, limits):
        errors.extend(invariant.check(obj))
    return errors


def check_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Run the Python side of every update rule of ``kind`` (``old`` is the stored job)."""
    errors: list[FieldError] = []
    for rule in transitions_for(kind):
        errors.extend(rule.check(old, new))
    return errors
