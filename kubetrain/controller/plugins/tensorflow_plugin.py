"""The TFJob plugin: a Pod and headless Service per replica, ``TF_CONFIG``
(``tensorflow.replica_env``) in the ``tensorflow`` container (else the first), workers
and evaluators gated on the Chief/Master, and upstream's success rule: the Chief/Master
succeeded; without one, Worker 0 did (``successPolicy: AllWorkers``: every Worker)."""

from __future__ import annotations

from typing import Any

from kubetrain.api.common import JobStatus, RestartPolicy
from kubetrain.api.errors import FieldError
from kubetrain.api.loader import Job
from kubetrain.api.tensorflow import (
    DEFAULT_CONTAINER,
    DEFAULT_RESTART_POLICY,
    SuccessPolicy,
    TFJob,
    TFReplicaType,
)
from kubetrain.controller.plugins import replicated, tensorflow
from kubetrain.controller.plugins.addressing import ClusterAddressing, EnvVar
from kubetrain.controller.plugins.base import Observed, Outcome, Replica, StartupRule
from kubetrain.controller.plugins.common import main_container
from kubetrain.controller.policies import success

CHIEF = TFReplicaType.CHIEF.value
MASTER = TFReplicaType.MASTER.value
PS = TFReplicaType.PS.value
WORKER = TFReplicaType.WORKER.value
EVALUATOR = TFReplicaType.EVALUATOR.value
ORDER = (CHIEF, MASTER, PS, WORKER, EVALUATOR)


def _typed(job: Job) -> TFJob:
    if not isinstance(job, TFJob):
        raise TypeError(f"the tensorflow plugin got a {job.kind}, expected a TFJob")
    return job


class TensorFlowPlugin:
    """Reconciles ``kubeflow.org/v1`` TFJobs."""

    kind = "TFJob"

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
        """With ``enableDynamicWorker``, a failed Worker does not fail the job."""
        return bool(_typed(job).spec.enable_dynamic_worker) and replica.replica_type == WORKER

    def startup_rules(self, job: Job) -> list[StartupRule]:
        return replicated.leader_rule(
            job, (CHIEF, MASTER), (WORKER, EVALUATOR), waiting_label="the workers"
        )

    def build(self, job: Job, observed: Observed) -> list[dict[str, Any]]:
        typed = _typed(job)

        def env_for(replica: Replica, index: int, container: dict[str, Any]) -> list[EnvVar]:
            spec = typed.replica_specs()[replica.replica_type]
            target = main_container(spec.template, DEFAULT_CONTAINER)
            if target is None or container.get("name") != target.get("name"):
                return []
            return tensorflow.replica_env(
                typed, replica.replica_type, replica.index, self.addressing
            )

        specs = typed.replica_specs()
        has_chief = CHIEF in specs or MASTER in specs

        def role_of(replica: Replica) -> str | None:
            if replica.replica_type in (CHIEF, MASTER):
                return "master"
            if not has_chief and replica.replica_type == WORKER and replica.index == 0:
                return "master"
            return None

        return replicated.build(
            job,
            observed,
            self.replicas(job),
            self.startup_rules(job),
            role_of=role_of,
            env_for=env_for,
        )

    def status(self, job: Job, observed: Observed) -> JobStatus:
        return replicated.status(job, self.replicas(job), observed)

    def is_running(self, job: Job, observed: Observed) -> bool:
        return replicated.is_running(self.replicas(job), observed)

    def outcome(self, job: Job, observed: Observed) -> Outcome | None:
        typed = _typed(job)
        return success.tensorflow(
            job.name,
            self.replicas(job),
            observed,
            all_workers=typed.spec.success_policy == SuccessPolicy.ALL_WORKERS,
        )
