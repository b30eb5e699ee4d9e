"""``TFJob``: a typed TensorFlow distributed job (kubeflow.org/v1 TFJob)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import constructs

from kubetrain.api import TFJob as TFJobModel
from kubetrain.api.kinds import TENSORFLOW
from kubetrain.constructs.job_common import (
    JobProps,
    check_restart_policy,
    emit_job,
    job_name,
    metadata,
    pod_template,
    run_policy_wire,
)


@dataclass(frozen=True, kw_only=True)
class TFJobProps(JobProps):
    """Props of :class:`TFJob`."""

    workers: int = 1
    """Worker replicas."""
    chief: bool = False
    """Run a Chief (it decides success and writes checkpoints). Default: Worker 0 does."""
    ps: int = 0
    """Parameter servers (ParameterServerStrategy). Default: none (MultiWorkerMirrored)."""
    evaluator: bool = False
    """Run an Evaluator replica."""
    all_workers_must_succeed: bool = False
    """successPolicy AllWorkers. Default: the Chief, else Worker 0, decides."""
    restart_policy: str = "Never"
    """Restart policy of every replica: Never, OnFailure, Always or ExitCode."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers < 0 or self.ps < 0:
            raise ValueError(f"workers ({self.workers}) and ps ({self.ps}) must be >= 0")
        if not (self.workers or self.chief):
            raise ValueError("workers (0) must be >= 1 without a chief: nothing would train")
        check_restart_policy(self.restart_policy)


class TFJob(constructs.Construct):
    """A TFJob; child id ``Resource``."""

    def __init__(self, scope: constructs.Construct, id: str, props: TFJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        counts = {
            "Chief": int(props.chief),
            "PS": props.ps,
            "Worker": props.workers,
            "Evaluator": int(props.evaluator),
        }
        specs: dict[str, Any] = {}
        for replica_type, replicas in counts.items():
            if replicas:
                specs[replica_type] = {
                    "replicas": replicas,
                    "restartPolicy": props.restart_policy,
                    "template": pod_template(
                        props,
                        name=self.name,
                        replica_type=replica_type,
                        container="tensorflow",
                        # Parameter servers and evaluators need no GPU of their own.
                        gpus=None if replica_type in ("Chief", "Worker") else 0,
                        bind_pool=replica_type in ("Chief", "Worker"),
                    ),
                }
        spec: dict[str, Any] = {"tfReplicaSpecs": specs}
        if props.all_workers_must_succeed:
            spec["successPolicy"] = "AllWorkers"
        if props.run_policy is not None:
            spec["runPolicy"] = run_policy_wire(props)
        job = emit_job(
            self,
            {
                "apiVersion": TENSORFLOW.api_version,
                "kind": TENSORFLOW.kind,
                "metadata": metadata(props, self.name),
                "spec": spec,
            },
        )
        assert isinstance(job, TFJobModel)
        self.job = job

    @property
    def world_size(self) -> int:
        """Training processes (Chief + Workers; MultiWorkerMirroredStrategy replicas)."""
        return self.props.workers + int(self.props.chief)
