"""TFJob (kubeflow.org/v1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, StrictBool

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase, ReplicaSpec, RunPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.job_kind import JobKind
from kubetrain.api.kind_info import KUBEFLOW_GROUP, KindInfo
from kubetrain.api.rules import (
    ROOT,
    Rule,
    cel_replicas,
    main_container_invariant,
    replicas_of,
    specs_of,
)

INFO = KindInfo(
    kind="TFJob",
    short="tf",
    group=KUBEFLOW_GROUP,
    version="v1",
    plural="tfjobs",
    singular="tfjob",
    operator_name="tfjob-controller",
    replica_specs_field="tfReplicaSpecs",
    replica_types=("Chief", "Master", "PS", "Worker", "Evaluator"),
    main_container="tensorflow",
    port_name="tfjob-port",
    default_port=2222,
    default_restart_policies=tuple(
        (t, "Never") for t in ("Chief", "Master", "PS", "Worker", "Evaluator")
    ),
    case_insensitive_replica_types=True,
)


class TFReplicaType(StrEnum):
    CHIEF = "Chief"
    MASTER = "Master"
    PS = "PS"
    WORKER = "Worker"
    EVALUATOR = "Evaluator"


class SuccessPolicy(StrEnum):
    """``""`` (default): the job succeeds when Worker 0 does; ``AllWorkers``: all must."""

    DEFAULT = ""
    ALL_WORKERS = "AllWorkers"


class TFJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    success_policy: SuccessPolicy | None = Field(
        default=None, description="'' (Worker 0 decides) or AllWorkers. Default: ''."
    )
    enable_dynamic_worker: StrictBool | None = Field(
        default=None, description="Sparse TF_CONFIG; Worker failures do not fail the job."
    )
    tf_replica_specs: dict[TFReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Chief/Master (at most one), PS, Worker, Evaluator; any letter case.",
    )


class TFJob(JobBase):
    """A TensorFlow distributed job, wire-compatible with Kubeflow's TFJob."""

    replica_specs_attr: ClassVar[str] = "tf_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["TFJob"] = "TFJob"
    spec: TFJobSpec


# --- the kind's own rules (beside every kind's, kubetrain.api.invariants) ---------------

_TF = INFO.replica_specs_field
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


def _invariants() -> tuple[Rule, ...]:
    return (
        Rule(
            "tf-replica-types-distinct",
            (INFO.kind,),
            TF_REPLICA_TYPES_DISTINCT,
            f"!has(self.spec.{_TF}) || self.spec.{_TF}.all(k, "
            f"self.spec.{_TF}.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",
            ROOT,
            _check_tf_distinct,
            f".spec.{_TF}",
        ),
        main_container_invariant(INFO),
        Rule(
            "tf-one-chief",
            (INFO.kind,),
            TF_ONE_CHIEF,
            _tf_chief_cel(),
            ROOT,
            _check_tf_chief,
            f".spec.{_TF}",
        ),
    )


JOB_KIND = JobKind(INFO, TFJob, _invariants())
