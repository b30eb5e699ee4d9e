"""TrainJob (Kubeflow Trainer v2): the rules of a TrainJob resolved against its runtime
(:mod:`kubetrain.api.trainer.resolve`), stated once for the operator and ``kubetrain run
--local``. The environment of each ML policy lives with its framework, which registers it
in :mod:`~kubetrain.frameworks.registry`; this module looks the runtime's policy up there.

- Replicas: the runtime's replicated jobs (``node``, ``launcher``, ``dataset-initializer``,
  ...), pod ``i`` of job ``j`` named ``<trainjob>-<j>-0-<i>`` (JobSet's host names).
- Environment: the policy's variables in the trainer's ``node`` container (torch: also
  the ``envInjection`` targets; MPI: the launcher's), nothing for a plain runtime; a
  runtime labelled ``trainer.kubeflow.org/framework: tensorflow`` (upstream has no
  TensorFlow policy) gets ``TF_CONFIG`` for MultiWorkerMirroredStrategy.
- Start order: each replicated job's ``dependsOn`` (and ``startupPolicy: InOrder``): its
  pods start once those jobs' pods are Ready, or Complete.
- Success: JobSet's success policy: every pod of ``All`` (or ``Any`` one) of the target
  replicated jobs (default: all of them) succeeded.
- Every container of every pod (init containers too) gets ``JOB_COMPLETION_INDEX``, its
  pod's index, from the ``batch.kubernetes.io/job-completion-index`` annotation, as the
  Job controller gives an Indexed Job's pods (user code reads it); a container that
  sets it keeps its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api.common import JobBase
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import TRAINJOB
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.frameworks.addressing import Addressing, EnvVar, trainjob_pod_name
from kubetrain.frameworks.base import Done, StartAfter
from kubetrain.frameworks.registry import policy_for
from kubetrain.frameworks.trainjob_nodes import index_env, typed


class TrainJobFramework:
    """The TrainJob's rules (see the module docs)."""

    info: KindInfo = TRAINJOB

    def role(self, job: JobBase, replica_type: str, index: int) -> str | None:
        return None  # the SDK reads JobSet's labels, not training.kubeflow.org/job-role

    def container_env(
        self,
        job: JobBase,
        replica_type: str,
        index: int,
        container: Mapping[str, Any],
        addressing: Addressing,
    ) -> list[EnvVar]:
        resolved = typed(job)
        policy = policy_for(resolved.spec.framework)
        if policy is None:
            return []
        name = str(container.get("name") or "")
        return policy.container_env(resolved, replica_type, name, index, addressing)

    def run_container(self, job: JobBase, replica_type: str) -> str | None:
        step = T.STEP_CONTAINERS.get(replica_type)
        return step if step is not None else T.NODE

    def start_order(self, job: JobBase) -> list[StartAfter]:
        resolved = typed(job)
        out: list[StartAfter] = []
        for waiting, dependencies in resolved.spec.depends_on.items():
            for dependency in dependencies:
                pods = resolved.pods_of(dependency.name)
                out.append(
                    StartAfter(
                        waiting=(waiting,),
                        needed=tuple((dependency.name, i) for i in range(pods)),
                        waiting_label=f"the {waiting} pods",
                        needed_label=f"the {pods} {dependency.name} pod(s)",
                        until=dependency.status,
                    )
                )
        return out

    def succeeded(self, job: JobBase, done: Done) -> str | None:
        resolved = typed(job)
        complete = [
            target
            for target in resolved.spec.success_targets
            if resolved.pods_of(target) > 0
            and all(done(target, i) for i in range(resolved.pods_of(target)))
        ]
        wanted = [t for t in resolved.spec.success_targets if resolved.pods_of(t) > 0]
        if resolved.spec.success_operator == "Any" and complete:
            return f"every {complete[0]} pod completed"
        if wanted and complete == wanted:
            return f"every {' and '.join(wanted)} pod completed"
        return None


def with_completion_index(container: Mapping[str, Any]) -> dict[str, Any]:
    """``container`` with ``JOB_COMPLETION_INDEX`` from the pod's completion-index
    annotation appended to its env, unless it sets the variable itself."""
    out = dict(container)
    env = list(out.get("env") or [])
    if not any(item.get("name") == E.JOB_COMPLETION_INDEX for item in env):
        env.append(index_env(E.JOB_COMPLETION_INDEX))
        out["env"] = env
    return out


def pod_names(job: ResolvedTrainJob) -> list[tuple[str, int, str]]:
    """Every pod the TrainJob runs: (replicated job, index, pod name), in start order."""
    return [
        (name, index, trainjob_pod_name(job.name, name, index))
        for name in job.spec.replicated_jobs
        for index in range(job.pods_of(name))
    ]


FRAMEWORK = TrainJobFramework()
