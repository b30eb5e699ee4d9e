"""``JAXJob``: a typed JAX distributed job (kubeflow.org/v1 JAXJob): Workers only, each
one JAX process over its pod's GPUs, Worker 0 the coordinator. The operator gives every
pod what ``jax.distributed.initialize`` needs (``COORDINATOR_ADDRESS``,
``COORDINATOR_PORT``, ``NUM_PROCESSES``, ``PROCESS_ID``; ``kubetrain.frameworks.jax``)."""

from __future__ import annotations

from dataclasses import dataclass

import constructs

from kubetrain.api import JAXJob as JAXJobModel
from kubetrain.api import JAXReplicaType
from kubetrain.api.jax import INFO
from kubetrain.constructs.job_common import (
    JobProps,
    check_restart_policy,
    emit_v1_job,
    job_name,
    replica_spec,
)
from kubetrain.frameworks import jax

WORKER = JAXReplicaType.WORKER.value


@dataclass(frozen=True, kw_only=True)
class JAXJobProps(JobProps):
    """Props of :class:`JAXJob`."""

    workers: int = 1
    """Worker replicas (at least one): JAX processes."""
    restart_policy: str = INFO.default_restart_policy(WORKER)
    """Restart policy of the Workers: Never (upstream's default), OnFailure, Always or
    ExitCode."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 1:
            raise ValueError(f"workers ({self.workers}) must be >= 1")
        check_restart_policy(self.restart_policy)


class JAXJob(constructs.Construct):
    """A JAXJob of ``workers`` Workers; child id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: JAXJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        worker = replica_spec(
            props,
            INFO,
            name=self.name,
            replica_type=WORKER,
            replicas=props.workers,
            restart_policy=props.restart_policy,
        )
        job = emit_v1_job(self, INFO, props, self.name, {WORKER: worker})
        assert isinstance(job, JAXJobModel)
        self.job = job

    @property
    def world_size(self) -> int:
        """JAX processes, as the operator counts them for ``NUM_PROCESSES``."""
        return jax.num_processes(self.job)
