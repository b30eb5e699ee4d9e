"""The PyTorchJob plugin: a Pod and headless Service per replica, the torchrun
environment (``pytorch.replica_env``) in every container, workers gated on the Master,
and upstream's success rule (the Master succeeded; without one, every Worker did)."""

from __future__ import annotations

from typing import Any

from kubetrain.api.common import JobStatus, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.loader import Job
from kubetrain.api.pytorch import DEFAULT_CONTAINER, DEFAULT_RESTART_POLICY, PyTorchJob
from kubetrain.controller.plugins import pytorch, replicated
from kubetrain.controller.plugins.addressing import ClusterAddressing, EnvVar
from kubetrain.controller.plugins.base import Observed, Outcome, Replica, StartupRule
from kubetrain.controller.policies import success

ORDER = (pytorch.MASTER, pytorch.WORKER)


def _typed(job: Job) -> PyTorchJob:
    if not isinstance(job, PyTorchJob):
        raise TypeError(f"the pytorch plugin got a {job.kind}, expected a PyTorchJob")
    return job


class PyTorchPlugin:
    """Reconciles ``kubeflow.org/v1`` PyTorchJobs."""

    kind = "PyTorchJob"

    def __init__(self, addressing: ClusterAddressing | None = None) -> None:
        self.addressing = addressing or ClusterAddressing()

    def validate(self, job: Job) -> list[FieldError]:
        _typed(job)
        return []

    def replicas(self, job: Job) -> list[Replica]:
        return replicated.replica_list(
            job, ORDER, DEFAULT_CONTAINER, RestartPolicy(DEFAULT_RESTART_POLICY)
        )

    def tolerates_failure(self, job: Job, replica: Replica) -> bool:
        """Every failed PyTorch pod counts (restarted or failing the job)."""
        return False

    def startup_rules(self, job: Job) -> list[StartupRule]:
        return replicated.leader_rule(
            job, (pytorch.MASTER,), (pytorch.WORKER,), waiting_label="the workers"
        )

    def build(self, job: Job, observed: Observed) -> list[dict[str, Any]]:
        typed = _typed(job)

        def env_for(replica: Replica, index: int, container: dict[str, Any]) -> list[EnvVar]:
            return pytorch.replica_env(typed, replica.replica_type, replica.index, self.addressing)

        return replicated.build(
            job,
            observed,
            self.replicas(job),
            self.startup_rules(job),
            role_of=lambda r: "master" if r.replica_type == pytorch.MASTER else None,
            env_for=env_for,
        )

    def status(self, job: Job, observed: Observed) -> JobStatus:
        return replicated.status(job, self.replicas(job), observed)

    def is_running(self, job: Job, observed: Observed) -> bool:
        return replicated.is_running(self.replicas(job), observed)

    def outcome(self, job: Job, observed: Observed) -> Outcome | None:
        typed = _typed(job)
        return success.pytorch(
            job.name, self.replicas(job), observed, elastic=typed.spec.elastic_policy is not None
        )
