"""PyTorchJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StrictBool, StrictStr

from kubetrain.api.base import (
    KubeModel,
    MetricSpec,
    NonNegInt32,
    Port,
    PositiveInt32,
    StoredDefault,
)
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.job_kind import JobKind
from kubetrain.api.kind_info import KUBEFLOW_GROUP, KindInfo
from kubetrain.api.rules import (
    ROOT,
    Rule,
    cel_present,
    cel_replicas,
    main_container_invariant,
    replicas_of,
    spec_of,
    specs_of,
)
from kubetrain.api.wire import as_int

NPROC_PATTERN = r"^(auto|cpu|gpu|[1-9][0-9]*)$"


INFO = KindInfo(
    kind="PyTorchJob",
    short="pytorch",
    group=KUBEFLOW_GROUP,
    version="v1",
    plural="pytorchjobs",
    singular="pytorchjob",
    operator_name="pytorchjob-controller",
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    main_container="pytorch",
    port_name="pytorchjob-port",
    default_port=23456,
    default_restart_policies=(("Master", "OnFailure"), ("Worker", "OnFailure")),
    scale_replica_type="Worker",
)


class PyTorchReplicaType(StrEnum):
    MASTER = "Master"
    WORKER = "Worker"


class RdzvBackend(StrEnum):
    C10D = "c10d"
    ETCD = "etcd"
    ETCD_V2 = "etcd-v2"


class RdzvConf(KubeModel):
    key: StrictStr
    value: StrictStr


class ElasticPolicy(KubeModel):
    """torchrun elastic launch settings (the PET_* environment)."""

    min_replicas: PositiveInt32 | None = Field(
        default=None,
        description="Lower bound of nodes. Default: maxReplicas, else Worker replicas.",
    )
    max_replicas: PositiveInt32 | None = Field(
        default=None,
        description="Upper bound of nodes. Default: minReplicas, else Worker replicas.",
    )
    rdzv_backend: Annotated[RdzvBackend | None, StoredDefault(RdzvBackend.C10D.value)] = Field(
        default=None, description="Default: c10d."
    )
    rdzv_port: Port | None = Field(default=None, description="Default: the Worker's port.")
    rdzv_host: StrictStr | None = Field(default=None, description="Default: <job>-worker-0.")
    rdzv_id: StrictStr | None = Field(default=None, description="Default: the job's UID.")
    rdzv_conf: list[RdzvConf] | None = None
    standalone: StrictBool | None = None
    n_proc_per_node: PositiveInt32 | None = Field(
        default=None, description="Deprecated: use spec.nprocPerNode."
    )
    max_restarts: NonNegInt32 | None = None
    metrics: list[MetricSpec] | None = Field(
        default=None, description="autoscaling/v2 metrics; non-empty creates an HPA."
    )


class PyTorchJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: StrictStr | None = Field(
        default=None,
        pattern=NPROC_PATTERN,
        description="Processes per node: auto, cpu, gpu or a positive integer. Default: auto.",
    )
    pytorch_replica_specs: dict[PyTorchReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Master (exactly one replica) and Worker (at least one) replica specs.",
    )


class PyTorchJob(JobBase):
    """A PyTorch DDP / torchrun job, wire-compatible with Kubeflow's PyTorchJob."""

    replica_specs_attr: ClassVar[str] = "pytorch_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    spec: PyTorchJobSpec


# --- the kind's own rules (beside every kind's, kubetrain.api.invariants) ---------------

_PT = INFO.replica_specs_field
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


#: Upstream's webhook messages (pytorchjob_webhook.go, v1.9), on the same fields.
PYTORCH_ELASTIC_NEEDS_WORKER = "[Worker] must be configured if elastic policy is used"


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


PYTORCH_NPROC_ONCE = "must not be used with spec.nprocPerNode"


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


def _invariants() -> tuple[Rule, ...]:
    master = cel_replicas(f"self.spec.{_PT}", "'Master'")
    worker = cel_replicas(f"self.spec.{_PT}", "'Worker'")
    return (
        Rule(
            "pytorch-one-master",
            (INFO.kind,),
            PYTORCH_ONE_MASTER,
            f"!({cel_present(_PT, 'Master')}) || {master} == 1",
            ROOT,
            _check_pytorch_master,
            f".spec.{_PT}",
        ),
        Rule(
            "pytorch-worker-at-least-one",
            (INFO.kind,),
            PYTORCH_WORKER_AT_LEAST_ONE,
            f"!({cel_present(_PT, 'Worker')}) || {worker} >= 1",
            ROOT,
            _check_pytorch_worker,
            f".spec.{_PT}",
        ),
        main_container_invariant(INFO),
        Rule(
            "pytorch-elastic-needs-worker",
            (INFO.kind,),
            PYTORCH_ELASTIC_NEEDS_WORKER,
            f"!has(self.spec.elasticPolicy) || ({cel_present(_PT, 'Worker')})",
            ROOT,
            _check_pytorch_elastic_worker,
            f".spec.{_PT}",
        ),
        Rule(
            "pytorch-elastic-bounds",
            (INFO.kind,),
            PYTORCH_ELASTIC_BOUNDS,
            "!has(self.spec.elasticPolicy) || !has(self.spec.elasticPolicy.minReplicas) || "
            "!has(self.spec.elasticPolicy.maxReplicas) || "
            "self.spec.elasticPolicy.minReplicas <= self.spec.elasticPolicy.maxReplicas",
            ROOT,
            _check_pytorch_elastic_bounds,
            ".spec.elasticPolicy.minReplicas",
        ),
        Rule(
            "pytorch-nproc-once",
            (INFO.kind,),
            PYTORCH_NPROC_ONCE,
            "!has(self.spec.elasticPolicy) || !has(self.spec.elasticPolicy.nProcPerNode) || "
            "!has(self.spec.nprocPerNode)",
            ROOT,
            _check_pytorch_nproc,
            ".spec.elasticPolicy.nProcPerNode",
        ),
    )


# --- the kind's own defaults (beside every kind's, kubetrain.api.defaults) ----------------


def default_nproc_per_node(spec: dict[str, Any]) -> str | None:
    """A PyTorchJob's ``nprocPerNode`` default (wire form): ``auto``, unless the deprecated
    ``elasticPolicy.nProcPerNode`` says it (then none is set). The one place it is decided."""
    elastic = spec.get("elasticPolicy")
    if elastic is not None and elastic.get("nProcPerNode") is not None:
        return None
    return "auto"


def default_elastic_bounds(spec: dict[str, Any], replica_specs_field: str) -> None:
    """``elasticPolicy`` min/max mirror each other, or both take the Worker replica count
    (upstream's PyTorchJob and PaddleJob defaulters)."""
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        workers = spec[replica_specs_field].get("Worker", {}).get("replicas", 1)
        low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
        elastic["minReplicas"] = low if low is not None else (high if high is not None else workers)
        elastic["maxReplicas"] = high if high is not None else elastic["minReplicas"]


def _defaults(spec: dict[str, Any]) -> None:
    nproc = default_nproc_per_node(spec)
    if nproc is not None:
        spec.setdefault("nprocPerNode", nproc)
    default_elastic_bounds(spec, INFO.replica_specs_field)


JOB_KIND = JobKind(INFO, PyTorchJob, _invariants(), _defaults)
