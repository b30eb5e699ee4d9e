"""``PaddleJob``: a typed PaddlePaddle distributed job (kubeflow.org/v1 PaddleJob).

Collective mode (the default) runs Workers only, Worker 0 the rendezvous point;
parameter-server mode adds Masters, the parameter servers. The operator gives every pod
``PADDLE_MASTER``, ``PADDLE_NNODES`` and ``PADDLE_JOB_ID`` (``kubetrain.frameworks.paddle``).
"""

from __future__ import annotations

from dataclasses import dataclass

import constructs

from kubetrain.api import PaddleJob as PaddleJobModel
from kubetrain.api import PaddleReplicaType
from kubetrain.api.paddle import INFO
from kubetrain.constructs.job_common import (
    JobProps,
    check_restart_policy,
    emit_v1_job,
    job_name,
    replica_spec,
)
from kubetrain.frameworks import paddle

MASTER, WORKER = PaddleReplicaType.MASTER.value, PaddleReplicaType.WORKER.value


@dataclass(frozen=True, kw_only=True)
class PaddleJobProps(JobProps):
    """Props of :class:`PaddleJob`."""

    workers: int = 1
    """Worker replicas: the trainers (at least one)."""
    masters: int = 0
    """Master replicas: the parameter servers (parameter-server mode). They get no GPU and
    no node pool binding, as a TFJob's parameter servers. Default: none (collective mode)."""
    restart_policy: str = INFO.default_restart_policy(WORKER)
    """Restart policy of every replica: OnFailure (upstream's default), Never, Always or
    ExitCode."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 1:
            raise ValueError(
                f"workers ({self.workers}) must be >= 1: the Workers are the trainers, in "
                "either mode"
            )
        if self.masters < 0:
            raise ValueError(f"masters ({self.masters}) must be >= 0")
        check_restart_policy(self.restart_policy)


class PaddleJob(constructs.Construct):
    """A PaddleJob: Workers, and Masters in parameter-server mode; child id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: PaddleJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        specs = {}
        for replica_type, replicas in ((MASTER, props.masters), (WORKER, props.workers)):
            if replicas:
                specs[replica_type] = replica_spec(
                    props,
                    INFO,
                    name=self.name,
                    replica_type=replica_type,
                    replicas=replicas,
                    restart_policy=props.restart_policy,
                    trains=replica_type == WORKER,
                )
        job = emit_v1_job(self, INFO, props, self.name, specs)
        assert isinstance(job, PaddleJobModel)
        self.job = job

    @property
    def nodes(self) -> int:
        """Pods in the job, as the operator counts them for ``PADDLE_NNODES``."""
        return paddle.nodes(self.job)
