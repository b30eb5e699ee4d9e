"""The invariants of each kind (replica types, PyTorchJob, TFJob, MPIJob, XGBoostJob) and of every
replica's pod template (containers, images, the main container upstream requires)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.kinds import MPI, PYTORCH, TENSORFLOW, XGBOOST
from kubetrain.api.rules import (
    CASE_INSENSITIVE_KINDS,
    MAIN_CONTAINERS,
    REPLICA,
    REPLICA_FIELDS,
    REPLICA_TYPES,
    Invariant,
    cel_present,
    cel_replicas,
    containers_of,
    replica_type_message,
    replicas_of,
    rule_prefix,
    spec_of,
    specs_of,
)
from kubetrain.api.wire import as_int

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
            for key in specs_of(obj, field)
            if (str(key).lower() if folded else key) not in wanted
        ]

    if folded:
        listed = ", ".join(f"'{t.lower()}'" for t in allowed)
        rule = f"!has(self.spec.{field}) || self.spec.{field}.all(k, k.lowerAscii() in [{listed}])"
    else:
        listed = ", ".join(f"'{t}'" for t in allowed)
        rule = f"!has(self.spec.{field}) || self.spec.{field}.all(k, k in [{listed}])"
    return Invariant(
        f"{rule_prefix(kind)}-replica-types", kind, message, rule, f".spec.{field}", check
    )


TF_REPLICA_TYPES_DISTINCT = (
    "replica types must differ in more than letter case (not both 'worker' and 'Worker')"
)


def _check_tf_distinct(obj: dict[str, Any]) -> list[FieldError]:
    seen: dict[str, str] = {}
    errors = []
    for key in specs_of(obj, _TF):
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
    specs = specs_of(obj, _PT)
    count = replicas_of(specs["Master"]) if "Master" in specs else None
    if count is not None and count != 1:
        return [FieldError(f"spec.{_PT}.Master.replicas", PYTORCH_ONE_MASTER, count)]
    return []


PYTORCH_WORKER_AT_LEAST_ONE = (
    "a PyTorchJob's Worker must have at least 1 replica (leave Worker out for a Master only)"
)


def _check_pytorch_worker(obj: dict[str, Any]) -> list[FieldError]:
    specs = specs_of(obj, _PT)
    count = replicas_of(specs["Worker"]) if "Worker" in specs else None
    if count is not None and count < 1:
        return [FieldError(f"spec.{_PT}.Worker.replicas", PYTORCH_WORKER_AT_LEAST_ONE, count)]
    return []


PYTORCH_ELASTIC_NEEDS_WORKER = "elasticPolicy needs a Worker replica spec"


def _check_pytorch_elastic_worker(obj: dict[str, Any]) -> list[FieldError]:
    has_elastic = spec_of(obj).get("elasticPolicy") is not None
    if has_elastic and "Worker" not in specs_of(obj, _PT):
        return [FieldError(f"spec.{_PT}", PYTORCH_ELASTIC_NEEDS_WORKER, kind="required")]
    return []


PYTORCH_ELASTIC_BOUNDS = "elasticPolicy.minReplicas must be <= elasticPolicy.maxReplicas"


def _check_pytorch_elastic_bounds(obj: dict[str, Any]) -> list[FieldError]:
    policy = spec_of(obj).get("elasticPolicy")
    if isinstance(policy, dict):
        low, high = as_int(policy.get("minReplicas")), as_int(policy.get("maxReplicas"))
        if low is not None and high is not None and low > high:
            return [FieldError("spec.elasticPolicy.minReplicas", PYTORCH_ELASTIC_BOUNDS, low)]
    return []


PYTORCH_NPROC_ONCE = "set spec.nprocPerNode or the deprecated elasticPolicy.nProcPerNode, not both"


def _check_pytorch_nproc(obj: dict[str, Any]) -> list[FieldError]:
    spec = spec_of(obj)
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
    specs = specs_of(obj, _TF)
    chiefs = {key: replicas_of(rspec) for key, rspec in specs.items() if key.lower() in _CHIEFS}
    if sum(count or 0 for count in chiefs.values()) > 1:
        return [FieldError(f"spec.{_TF}", TF_ONE_CHIEF, chiefs)]
    return []


def _tf_chief_cel() -> str:
    specs = f"self.spec.{_TF}"
    is_chief = "k.lowerAscii() in ['chief', 'master']"
    count = cel_replicas(specs, "k")
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
    specs = specs_of(obj, _MPI)
    if "Launcher" not in specs:
        return [FieldError(f"spec.{_MPI}.Launcher", MPI_ONE_LAUNCHER, kind="required")]
    count = replicas_of(specs["Launcher"])
    if count is not None and count != 1:
        return [FieldError(f"spec.{_MPI}.Launcher.replicas", MPI_ONE_LAUNCHER, count)]
    return []


def _check_mpi_worker(obj: dict[str, Any]) -> list[FieldError]:
    specs = specs_of(obj, _MPI)
    if "Worker" not in specs:
        if spec_of(obj).get("runLauncherAsWorker") is True:
            return []
        return [FieldError(f"spec.{_MPI}.Worker", MPI_NEEDS_WORKER, kind="required")]
    count = replicas_of(specs["Worker"])
    if count is not None and count < 1:
        return [FieldError(f"spec.{_MPI}.Worker.replicas", MPI_NEEDS_WORKER, count)]
    return []


def _check_mpi_restart(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for rtype, rspec in specs_of(obj, _MPI).items():
        policy = rspec.get("restartPolicy") if isinstance(rspec, dict) else None
        if policy is not None and policy not in ("Never", "OnFailure"):
            errors.append(
                FieldError(f"spec.{_MPI}.{rtype}.restartPolicy", MPI_RESTART_POLICY, policy)
            )
    return errors


# --- XGBoostJob --------------------------------------------------------------------------

_XGB = "xgbReplicaSpecs"
# Upstream's webhook words ("must be present", "must be 1"), in a sentence of their own.
XGB_NEEDS_MASTER = "an XGBoostJob's Master replica spec must be present (it runs the tracker)"
XGB_ONE_MASTER = "an XGBoostJob's Master replicas must be 1"


def _check_xgb_has_master(obj: dict[str, Any]) -> list[FieldError]:
    if "Master" not in specs_of(obj, _XGB):
        return [FieldError(f"spec.{_XGB}.Master", XGB_NEEDS_MASTER, kind="required")]
    return []


def _check_xgb_one_master(obj: dict[str, Any]) -> list[FieldError]:
    specs = specs_of(obj, _XGB)
    count = replicas_of(specs["Master"]) if "Master" in specs else None
    if count is not None and count != 1:
        return [FieldError(f"spec.{_XGB}.Master.replicas", XGB_ONE_MASTER, count)]
    return []


# --- every kind: pod templates -----------------------------------------------------------

NEEDS_CONTAINERS = "a replica's pod template must have at least one container"
NEEDS_IMAGE = "every container must have an image"


def _main_container_message(kind: str) -> str:
    # Upstream's own words, so that scripts looking for them still find them.
    return f"must have at least one container with name {MAIN_CONTAINERS[kind]}"


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


def _main_container_check(kind: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    field, name, message = (
        REPLICA_FIELDS[kind],
        MAIN_CONTAINERS[kind],
        _main_container_message(kind),
    )

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


_HAS_CONTAINERS = "has(self.template.spec) && has(self.template.spec.containers)"


def _main_container_invariant(kind: str) -> Invariant:
    name = MAIN_CONTAINERS[kind]
    return Invariant(
        f"{rule_prefix(kind)}-main-container",
        kind,
        _main_container_message(kind),
        f"{_HAS_CONTAINERS} && self.template.spec.containers.exists(c, c.name == '{name}')",
        ".template",
        _main_container_check(kind),
        REPLICA,
    )


def kind_specific() -> list[Invariant]:
    master = cel_replicas(f"self.spec.{_PT}", "'Master'")
    worker = cel_replicas(f"self.spec.{_PT}", "'Worker'")
    launcher = cel_replicas(f"self.spec.{_MPI}", "'Launcher'")
    mpi_worker = cel_replicas(f"self.spec.{_MPI}", "'Worker'")
    xgb_master = cel_replicas(f"self.spec.{_XGB}", "'Master'")
    return [
        Invariant(
            "pytorch-one-master",
            PYTORCH.kind,
            PYTORCH_ONE_MASTER,
            f"!({cel_present(_PT, 'Master')}) || {master} == 1",
            f".spec.{_PT}",
            _check_pytorch_master,
        ),
        Invariant(
            "pytorch-worker-at-least-one",
            PYTORCH.kind,
            PYTORCH_WORKER_AT_LEAST_ONE,
            f"!({cel_present(_PT, 'Worker')}) || {worker} >= 1",
            f".spec.{_PT}",
            _check_pytorch_worker,
        ),
        _main_container_invariant(PYTORCH.kind),
        Invariant(
            "pytorch-elastic-needs-worker",
            PYTORCH.kind,
            PYTORCH_ELASTIC_NEEDS_WORKER,
            f"!has(self.spec.elasticPolicy) || ({cel_present(_PT, 'Worker')})",
            f".spec.{_PT}",
            _check_pytorch_elastic_worker,
        ),
        Invariant(
            "pytorch-elastic-bounds",
            PYTORCH.kind,
            PYTORCH_ELASTIC_BOUNDS,
            "!has(self.spec.elasticPolicy) || !has(self.spec.elasticPolicy.minReplicas) || "
            "!has(self.spec.elasticPolicy.maxReplicas) || "
            "self.spec.elasticPolicy.minReplicas <= self.spec.elasticPolicy.maxReplicas",
            ".spec.elasticPolicy.minReplicas",
            _check_pytorch_elastic_bounds,
        ),
        Invariant(
            "pytorch-nproc-once",
            PYTORCH.kind,
            PYTORCH_NPROC_ONCE,
            "!has(self.spec.elasticPolicy) || !has(self.spec.elasticPolicy.nProcPerNode) || "
            "!has(self.spec.nprocPerNode)",
            ".spec.elasticPolicy.nProcPerNode",
            _check_pytorch_nproc,
        ),
        Invariant(
            "tf-replica-types-distinct",
            TENSORFLOW.kind,
            TF_REPLICA_TYPES_DISTINCT,
            f"!has(self.spec.{_TF}) || self.spec.{_TF}.all(k, "
            f"self.spec.{_TF}.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",
            f".spec.{_TF}",
            _check_tf_distinct,
        ),
        _main_container_invariant(TENSORFLOW.kind),
        Invariant(
            "tf-one-chief",
            TENSORFLOW.kind,
            TF_ONE_CHIEF,
            _tf_chief_cel(),
            f".spec.{_TF}",
            _check_tf_chief,
        ),
        Invariant(
            "xgboost-needs-master",
            XGBOOST.kind,
            XGB_NEEDS_MASTER,
            cel_present(_XGB, "Master"),
            f".spec.{_XGB}",
            _check_xgb_has_master,
        ),
        Invariant(
            "xgboost-one-master",
            XGBOOST.kind,
            XGB_ONE_MASTER,
            f"!({cel_present(_XGB, 'Master')}) || {xgb_master} == 1",
            f".spec.{_XGB}",
            _check_xgb_one_master,
        ),
        _main_container_invariant(XGBOOST.kind),
        Invariant(
            "mpi-one-launcher",
            MPI.kind,
            MPI_ONE_LAUNCHER,
            f"({cel_present(_MPI, 'Launcher')}) && {launcher} == 1",
            f".spec.{_MPI}",
            _check_mpi_launcher,
        ),
        Invariant(
            "mpi-needs-worker",
            MPI.kind,
            MPI_NEEDS_WORKER,
            f"({cel_present(_MPI, 'Worker')}) ? {mpi_worker} >= 1 : "
            "(has(self.spec.runLauncherAsWorker) && self.spec.runLauncherAsWorker)",
            f".spec.{_MPI}",
            _check_mpi_worker,
        ),
        Invariant(
            "mpi-restart-policy",
            MPI.kind,
            MPI_RESTART_POLICY,
            "!has(self.restartPolicy) || self.restartPolicy in ['Never', 'OnFailure']",
            ".restartPolicy",
            _check_mpi_restart,
            REPLICA,
        ),
    ]
