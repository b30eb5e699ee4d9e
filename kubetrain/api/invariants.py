"""Cross-field invariants, each stated twice: as a CEL rule the API server enforces and as
a Python check ``kubetrain validate`` runs offline, with one shared message.

Upstream Kubeflow checks these only in admission webhooks (which MPIJob lacks); here the
CRD itself rejects a bad job. Python checks work on the raw wire dict so they can run, and
report, even when other fields of the same document are invalid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.base import CelRule
from kubetrain.api.errors import FieldError

MAX_NAME = 63


@dataclass(frozen=True)
class Invariant:
    """One rule: ``cel`` is evaluated at the CRD root (``self`` is the whole object)."""

    name: str
    kind: str
    message: str
    cel: str
    field_path: str
    check: Callable[[dict[str, Any]], list[FieldError]]

    def cel_rule(self) -> CelRule:
        return CelRule(rule=self.cel, message=self.message, field_path=self.field_path)


def _specs(obj: dict[str, Any], field: str) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return {}
    specs = spec.get(field)
    return specs if isinstance(specs, dict) else {}


def _replicas(replica_spec: Any, default: int = 1) -> int | None:
    """The replica count, ``default`` when absent, None when not an int (reported elsewhere)."""
    if not isinstance(replica_spec, dict):
        return None
    value = replica_spec.get("replicas", default)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cel_replicas(field: str, rtype: str) -> str:
    ref = f"self.spec.{field}['{rtype}']"
    return f"(has({ref}.replicas) ? {ref}.replicas : 1)"


# --- PyTorchJob -------------------------------------------------------------------------

_PT = "pytorchReplicaSpecs"
PYTORCH_MASTER_AT_MOST_ONE = "a PyTorchJob has at most one Master replica"


def _check_pytorch_master(obj: dict[str, Any]) -> list[FieldError]:
    master = _specs(obj, _PT).get("Master")
    count = _replicas(master)
    if count is not None and count > 1:
        return [FieldError(f"spec.{_PT}.Master.replicas", PYTORCH_MASTER_AT_MOST_ONE, count)]
    return []


PYTORCH_ELASTIC_NEEDS_WORKER = "elasticPolicy needs a Worker replica spec"


def _check_pytorch_elastic_worker(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    has_elastic = isinstance(spec, dict) and spec.get("elasticPolicy") is not None
    if has_elastic and "Worker" not in _specs(obj, _PT):
        return [FieldError(f"spec.{_PT}", PYTORCH_ELASTIC_NEEDS_WORKER, kind="required")]
    return []


PYTORCH_ELASTIC_BOUNDS = "elasticPolicy.minReplicas must be <= elasticPolicy.maxReplicas"


def _check_pytorch_elastic_bounds(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    policy = spec.get("elasticPolicy") if isinstance(spec, dict) else None
    if isinstance(policy, dict):
        low, high = policy.get("minReplicas"), policy.get("maxReplicas")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            return [FieldError("spec.elasticPolicy.minReplicas", PYTORCH_ELASTIC_BOUNDS, low)]
    return []


PYTORCH_NPROC_ONCE = "set spec.nprocPerNode or the deprecated elasticPolicy.nProcPerNode, not both"


def _check_pytorch_nproc(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
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


def _check_tf_chief(obj: dict[str, Any]) -> list[FieldError]:
    specs = _specs(obj, _TF)
    total = sum(_replicas(specs[t]) or 0 for t in ("Chief", "Master") if t in specs)
    if total > 1:
        return [
            FieldError(
                f"spec.{_TF}",
                TF_ONE_CHIEF,
                {t: _replicas(specs[t]) for t in ("Chief", "Master") if t in specs},
            )
        ]
    return []


# --- MPIJob -----------------------------------------------------------------------------

_MPI = "mpiReplicaSpecs"
MPI_ONE_LAUNCHER = "an MPIJob needs exactly one Launcher replica"
MPI_NEEDS_WORKER = "an MPIJob needs a Worker replica spec with at least one replica"


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
        return [FieldError(f"spec.{_MPI}.Worker", MPI_NEEDS_WORKER, kind="required")]
    count = _replicas(specs["Worker"])
    if count is not None and count < 1:
        return [FieldError(f"spec.{_MPI}.Worker.replicas", MPI_NEEDS_WORKER, count)]
    return []


# --- every kind: child names must be DNS-1035 labels --------------------------------------

NAME_FITS = (
    "job name too long: every child '<name>-<replica type>-<index>' must fit a "
    f"{MAX_NAME}-character DNS-1035 label"
)


def _name_check(field: str) -> Callable[[dict[str, Any]], list[FieldError]]:
    def check(obj: dict[str, Any]) -> list[FieldError]:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
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
                    f"{NAME_FITS} ({longest!r} has {len(longest)}); use at most {room} characters",
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


def _present(field: str, rtype: str) -> str:
    return f"has(self.spec.{field}) && '{rtype}' in self.spec.{field}"


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "pytorch-master-at-most-one",
        "PyTorchJob",
        PYTORCH_MASTER_AT_MOST_ONE,
        f"!({_present(_PT, 'Master')}) || {_cel_replicas(_PT, 'Master')} <= 1",
        f".spec.{_PT}",
        _check_pytorch_master,
    ),
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
        "pytorch-name-fits",
        "PyTorchJob",
        NAME_FITS,
        _name_cel(_PT),
        ".metadata.name",
        _name_check(_PT),
    ),
    Invariant(
        "tf-one-chief",
        "TFJob",
        TF_ONE_CHIEF,
        f"({_present(_TF, 'Chief')} ? {_cel_replicas(_TF, 'Chief')} : 0) + "
        f"({_present(_TF, 'Master')} ? {_cel_replicas(_TF, 'Master')} : 0) <= 1",
        f".spec.{_TF}",
        _check_tf_chief,
    ),
    Invariant(
        "tf-name-fits",
        "TFJob",
        NAME_FITS,
        _name_cel(_TF),
        ".metadata.name",
        _name_check(_TF),
    ),
    Invariant(
        "mpi-one-launcher",
        "MPIJob",
        MPI_ONE_LAUNCHER,
        f"({_present(_MPI, 'Launcher')}) && {_cel_replicas(_MPI, 'Launcher')} == 1",
        f".spec.{_MPI}",
        _check_mpi_launcher,
    ),
    Invariant(
        "mpi-needs-worker",
        "MPIJob",
        MPI_NEEDS_WORKER,
        f"({_present(_MPI, 'Worker')}) && {_cel_replicas(_MPI, 'Worker')} >= 1",
        f".spec.{_MPI}",
        _check_mpi_worker,
    ),
    Invariant(
        "mpi-name-fits",
        "MPIJob",
        NAME_FITS,
        _name_cel(_MPI),
        ".metadata.name",
        _name_check(_MPI),
    ),
)


def invariants_for(kind: str) -> tuple[Invariant, ...]:
    return tuple(i for i in INVARIANTS if i.kind == kind)


def check_invariants(kind: str, obj: dict[str, Any]) -> list[FieldError]:
    """Run the Python side of every invariant of ``kind`` on a raw wire object."""
    errors: list[FieldError] = []
    for invariant in invariants_for(kind):
        errors.extend(invariant.check(obj))
    return errors
