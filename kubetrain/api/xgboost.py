"""XGBoostJob (kubeflow.org/v1): a Rabit tracker on the Master, Workers joining it (the
same kind also runs LightGBM's distributed training)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field

from kubetrain.api.base import KubeModel
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
    specs_of,
)

INFO = KindInfo(
    kind="XGBoostJob",
    short="xgboost",
    group=KUBEFLOW_GROUP,
    version="v1",
    plural="xgboostjobs",
    singular="xgboostjob",
    operator_name="xgboostjob-controller",
    replica_specs_field="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    main_container="xgboost",
    port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policies=(("Master", "Never"), ("Worker", "Never")),
)


class XGBoostReplicaType(StrEnum):
    MASTER = "Master"
    WORKER = "Worker"


class XGBoostJobSpec(KubeModel):
    run_policy: RunPolicy | None = None
    xgb_replica_specs: dict[XGBoostReplicaType, ReplicaSpec] = Field(
        min_length=1,
        description="Master (required, exactly one replica: the tracker) and Worker.",
    )


class XGBoostJob(JobBase):
    """A distributed XGBoost (or LightGBM) job, wire-compatible with Kubeflow's XGBoostJob."""

    replica_specs_attr: ClassVar[str] = "xgb_replica_specs"

    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["XGBoostJob"] = "XGBoostJob"
    spec: XGBoostJobSpec


# --- the kind's own rules (beside every kind's, kubetrain.api.invariants) ---------------

_XGB = INFO.replica_specs_field
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


def _invariants() -> tuple[Rule, ...]:
    master = cel_replicas(f"self.spec.{_XGB}", "'Master'")
    return (
        Rule(
            "xgboost-needs-master",
            (INFO.kind,),
            XGB_NEEDS_MASTER,
            cel_present(_XGB, "Master"),
            ROOT,
            _check_xgb_has_master,
            f".spec.{_XGB}",
        ),
        Rule(
            "xgboost-one-master",
            (INFO.kind,),
            XGB_ONE_MASTER,
            f"!({cel_present(_XGB, 'Master')}) || {master} == 1",
            ROOT,
            _check_xgb_one_master,
            f".spec.{_XGB}",
        ),
        main_container_invariant(INFO),
    )


JOB_KIND = JobKind(INFO, XGBoostJob, _invariants())
