"""``XGBoostJob``: a typed distributed XGBoost (or LightGBM) job (kubeflow.org/v1
XGBoostJob): one Master, which runs the Rabit tracker and is rank 0, and Workers that join
it. The operator gives every pod ``MASTER_ADDR``/``MASTER_PORT``, ``WORLD_SIZE`` and
``RANK`` (``kubetrain.frameworks.xgboost``)."""

from __future__ import annotations

from dataclasses import dataclass

import constructs

from kubetrain.api import XGBoostJob as XGBoostJobModel
from kubetrain.api import XGBoostReplicaType
from kubetrain.api.xgboost import INFO
from kubetrain.constructs.job_common import (
    JobProps,
    check_restart_policy,
    emit_v1_job,
    job_name,
    replica_spec,
)
from kubetrain.frameworks import xgboost

MASTER, WORKER = XGBoostReplicaType.MASTER.value, XGBoostReplicaType.WORKER.value


@dataclass(frozen=True, kw_only=True)
class XGBoostJobProps(JobProps):
    """Props of :class:`XGBoostJob`. Master and Workers train alike (one process each) and
    get ``gpus_per_node`` GPUs each."""

    workers: int = 1
    """Worker replicas besides the Master (0: the Master trains alone)."""
    restart_policy: str = INFO.default_restart_policy(WORKER)
    """Restart policy of every replica: Never (upstream's default), OnFailure, Always or
    ExitCode."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 0:
            raise ValueError(f"workers ({self.workers}) must be >= 0")
        check_restart_policy(self.restart_policy)


class XGBoostJob(constructs.Construct):
    """An XGBoostJob with a Master (exactly one: the tracker) and Workers; child id
    ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: XGBoostJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        specs = {
            MASTER: replica_spec(
                props,
                INFO,
                name=self.name,
                replica_type=MASTER,
                replicas=1,
                restart_policy=props.restart_policy,
            )
        }
        if props.workers:
            specs[WORKER] = replica_spec(
                props,
                INFO,
                name=self.name,
                replica_type=WORKER,
                replicas=props.workers,
                restart_policy=props.restart_policy,
            )
        job = emit_v1_job(self, INFO, props, self.name, specs)
        assert isinstance(job, XGBoostJobModel)
        self.job = job

    @property
    def world_size(self) -> int:
        """Processes in the job, as the operator counts them for ``WORLD_SIZE``."""
        return xgboost.world_size(self.job)
