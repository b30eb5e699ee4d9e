"""Gang scheduling: a job's pods are placed all together or not at all.

The operator creates one PodGroup per gang-scheduled job (named after the job, owned by
it) before any of the job's pods, and marks each member pod for the chosen backend:

- **scheduler-plugins** (the Coscheduling plugin): ``scheduling.x-k8s.io/v1alpha1``
  PodGroup ``{minMember, minResources, scheduleTimeoutSeconds}``; pods get the label
  ``scheduling.x-k8s.io/pod-group`` and the gang scheduler's ``schedulerName``.
- **Volcano**: ``scheduling.volcano.sh/v1beta1`` PodGroup ``{minMember, minResources,
  queue, priorityClassName}``; pods get the annotations ``scheduling.k8s.io/group-name``
  and ``volcano.sh/task-spec`` and ``schedulerName: volcano``. As upstream's operators
  do, pods are created only once Volcano has moved the PodGroup out of ``Pending`` (its
  enqueue action found room for the whole gang).

``minMember`` counts every pod that must run together (all replicas of a v1 job, the
MPI launcher included; a TrainJob's trainer pods, not its initializers, which finish
before them), or ``schedulingPolicy.minAvailable``. ``minResources`` is the sum of the
first ``minMember`` pods' effective requests, each counted as the scheduler counts it:
the larger of its containers' sum (plus restartable init containers) and its largest
init container, a limit standing in for a missing request.

Under gang scheduling the startup gates are off: a pod held back until others are Ready
could never join the gang it is counted in. Replicas connect the way they do without an
operator's help (torchrun's rendezvous waits for the master; an MPI launcher's Job
retries until its workers serve sshd).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api import quantity
from kubetrain.api.common import JobBase
from kubetrain.api.errors import FieldError
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.controller.config import GangScheduler, OperatorConfig

#: The PodGroup kind of both backends (each in its own API group).
POD_GROUP = "PodGroup"
#: scheduler-plugins' pod label naming the PodGroup.
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
#: Volcano's pod annotations: the PodGroup, and the replica type (its "task").
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
#: The TrainJob annotation upstream Trainer reads a Volcano queue from.
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
#: Volcano PodGroup phases in which the gang has no room yet: pods are not created.
VOLCANO_WAITING_PHASES = ("", "Pending")


@dataclass(frozen=True)
class Backend:
    """One gang scheduler's PodGroup API and pod marking."""

    scheduler: GangScheduler
    group: str
    version: str
    #: The schedulerName its pods get unless the operator is told another.
    scheduler_name: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd(self) -> str:
        return f"podgroups.{self.group}"


COSCHEDULING = Backend(
    GangScheduler.SCHEDULER_PLUGINS,
    "scheduling.x-k8s.io",
    "v1alpha1",
    # The name scheduler-plugins' own install gives its scheduler ("as a second scheduler").
    "scheduler-plugins-scheduler",
)
VOLCANO = Backend(GangScheduler.VOLCANO, "scheduling.volcano.sh", "v1beta1", "volcano")
BACKENDS: Mapping[GangScheduler, Backend] = {b.scheduler: b for b in (COSCHEDULING, VOLCANO)}


@dataclass(frozen=True)
class GangConfig:
    """The operator's gang scheduler: its backend and the schedulerName pods get."""

    backend: Backend
    scheduler_name: str

    @classmethod
    def of(cls, config: OperatorConfig) -> GangConfig | None:
        """The gang configuration of an operator (None: gang scheduling is off)."""
        if config.gang_scheduler is GangScheduler.NONE:
            return None
        backend = BACKENDS[config.gang_scheduler]
        return cls(backend, config.gang_scheduler_name or backend.scheduler_name)


@dataclass(frozen=True)
class Gang:
    """What one job asks of its gang."""

    backend: Backend
    scheduler_name: str
    #: Replica types whose pods are members (a TrainJob's initializers are not).
    member_types: frozenset[str]
    min_available: int | None = None
    min_resources: Mapping[str, str] | None = None
    queue: str | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None


def requested_backend(job: JobBase) -> GangScheduler | None:
    """The backend a TrainJob's runtime asks for (``podGroupPolicy``), if any."""
    policy = job.spec.pod_group_policy if isinstance(job, ResolvedTrainJob) else None
    if policy is None:
        return None
    if policy.coscheduling is not None:
        return GangScheduler.SCHEDULER_PLUGINS
    if policy.volcano is not None:
        return GangScheduler.VOLCANO
    return None


def check_backend(job: JobBase, config: GangConfig | None) -> list[FieldError]:
    """A TrainJob whose runtime asks for a gang scheduler this operator does not run
    cannot be scheduled as asked: say so instead of placing its pods one by one."""
    wanted = requested_backend(job)
    if wanted is None:
        return []
    running = config.backend.scheduler if config is not None else GangScheduler.NONE
    if wanted is running:
        return []
    runtime = job.spec.runtime_name if isinstance(job, ResolvedTrainJob) else ""
    return [
        FieldError(
            "spec.runtimeRef",
            f"a runtime this operator can gang-schedule: runtime {runtime}'s podGroupPolicy "
            f"asks for {wanted.value} and the operator runs with "
            f"--gang-scheduler={running.value}",
        )
    ]


def gang_of(job: JobBase, config: GangConfig | None, member_types: Iterable[str]) -> Gang | None:
    """The gang ``job`` is scheduled as, or None. v1 jobs: every job when the operator
    has a gang scheduler, shaped by ``runPolicy.schedulingPolicy``. TrainJobs: those whose
    runtime has a ``podGroupPolicy`` (:func:`check_backend` refuses a mismatch)."""
    if config is None:
        return None
    members = frozenset(member_types)
    wanted = requested_backend(job)
    if isinstance(job, ResolvedTrainJob):
        policy = job.spec.pod_group_policy
        if policy is None or wanted is not config.backend.scheduler:
            return None
        timeout = policy.coscheduling.schedule_timeout_seconds if policy.coscheduling else None
        annotations = job.metadata.annotations or {}
        return Gang(
            config.backend,
            config.scheduler_name,
            members,
            queue=annotations.get(VOLCANO_QUEUE_ANNOTATION),
            schedule_timeout_seconds=timeout if timeout else 60,
        )
    scheduling = job.run_policy.scheduling_policy if job.run_policy else None
    if scheduling is None:
        return Gang(config.backend, config.scheduler_name, members)
    declared = {k: str(v) for k, v in (scheduling.min_resources or {}).items()}
    return Gang(
        config.backend,
        config.scheduler_name,
        members,
        min_available=scheduling.min_available,
        min_resources=declared or None,
        queue=scheduling.queue,
        priority_class=scheduling.priority_class,
        schedule_timeout_seconds=scheduling.schedule_timeout_seconds,
    )


# -- pods ---------------------------------------------------------------------------------


def _template(child: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod (template) of a member child: a Pod itself, or a launcher Job's template."""
    if child.get("kind") == "Pod":
        return child
    if child.get("kind") == "Job":
        template: Mapping[str, Any] | None = (child.get("spec") or {}).get("template")
        return template
    return None


def _replica_type(pod: Mapping[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(K.REPLICA_TYPE, ""))


def is_member(gang: Gang, child: Mapping[str, Any]) -> bool:
    """Whether ``child`` (a Pod, or a Job whose pod is one) belongs to the gang."""
    pod = _template(child)
    if pod is None:
        return False
    rtype = _replica_type(pod)
    return rtype.lower() in {t.lower() for t in gang.member_types}


def mark(gang: Gang, group: str, child: dict[str, Any]) -> None:
    """Mark a member pod (or a Job's pod template) for the gang scheduler, in place; a
    schedulerName the template sets is kept (upstream warns and keeps it too)."""
    pod = child if child.get("kind") == "Pod" else child["spec"]["template"]
    meta = pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", gang.scheduler_name)
    if gang.backend is VOLCANO:
        annotations = meta.setdefault("annotations", {})
        annotations[VOLCANO_GROUP_ANNOTATION] = group
        annotations[VOLCANO_TASK_ANNOTATION] = _replica_type(pod)
    else:
        meta.setdefault("labels", {})[COSCHEDULING_LABEL] = group


def effective_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod's requests as the scheduler counts them: per resource, the larger of the
    containers' sum (with restartable init containers, which run beside them) and the
    largest regular init container (plus the restartable ones started before it)."""

    def requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
        resources = container.get("resources") or {}
        out = {k: quantity.amount(v) for k, v in (resources.get("limits") or {}).items()}
        out.update({k: quantity.amount(v) for k, v in (resources.get("requests") or {}).items()})
        return out

    total: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or []:
        _add(total, requests(container))
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for init in pod_spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":
            _add(sidecars, requests(init))
            continue
        running = dict(sidecars)
        _add(running, requests(init))
        for key, value in running.items():
            peak[key] = max(peak.get(key, Decimal(0)), value)
    _add(total, sidecars)
    for key, value in peak.items():
        total[key] = max(total.get(key, Decimal(0)), value)
    for key, value in (pod_spec.get("overhead") or {}).items():
        total[key] = total.get(key, Decimal(0)) + quantity.amount(value)
    return total


def _add(into: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, Decimal(0)) + value


def format_quantity(value: Decimal) -> str:
    """A quantity as Kubernetes writes it: a whole number, else millis rounded up."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value(rounding=ROUND_CEILING))}m"


# -- the PodGroup -------------------------------------------------------------------------


def pod_group(
    gang: Gang,
    group: str,
    namespace: str,
    members: Sequence[Mapping[str, Any]],
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """The PodGroup of a job whose member children (Pods, launcher Jobs) are ``members``,
    in the order the plugin builds them (leaders first)."""
    pods = [p for p in (_template(m) for m in members) if p is not None]
    total = len(pods)
    min_member = gang.min_available if gang.min_available is not None else total
    min_member = max(1, min(min_member, total)) if total else 0
    if gang.min_resources is not None:
        min_resources = dict(gang.min_resources)
    else:
        sums: dict[str, Decimal] = {}
        for pod in pods[:min_member]:
            _add(sums, effective_requests(pod.get("spec") or {}))
        min_resources = {k: format_quantity(v) for k, v in sorted(sums.items()) if v}
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources:
        spec["minResources"] = min_resources
    if gang.backend is VOLCANO:
        if gang.queue:
            spec["queue"] = gang.queue
        if gang.priority_class:
            spec["priorityClassName"] = gang.priority_class
    elif gang.schedule_timeout_seconds:
        spec["scheduleTimeoutSeconds"] = gang.schedule_timeout_seconds
    meta = dict(metadata)
    meta["name"] = group
    meta["namespace"] = namespace
    return {
        "apiVersion": gang.backend.api_version,
        "kind": POD_GROUP,
        "metadata": meta,
        "spec": spec,
    }


def holds_pods(gang: Gang, observed_group: Mapping[str, Any] | None) -> bool:
    """Whether the job's pods must wait: no PodGroup yet, or (Volcano) one still Pending."""
    if observed_group is None:
        return True
    if gang.backend is VOLCANO:
        phase = str((observed_group.get("status") or {}).get("phase") or "")
        return phase in VOLCANO_WAITING_PHASES
    return False
