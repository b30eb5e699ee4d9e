"""A TrainJob resolved against its runtime: the pods it runs, per replicated job, with its
``runtimePatches``, ``spec.trainer`` and ``spec.initializer`` merged into the runtime's
template as upstream Trainer v2.3.0 merges them, and the run policy its lifecycle
follows. Pure: the operator and ``kubetrain run --local`` both call :func:`resolve`.

- Pods per replicated job: the trainer's (the one labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``) runs ``numNodes`` pods (the
  TrainJob's, else the runtime's: ``kubetrain.api.trainer.elastic.start_nodes``), unless
  the policy's :class:`NodeLayout` places them otherwise (the MPI policy's, in
  ``kubetrain.frameworks.mpi``: the launcher runs one and ``node`` the rest). Every other
  replicated job runs ``replicas x parallelism`` pods (1 by default).
- ``spec.trainer``: ``image``, ``command`` and ``args`` replace the trainer's ``node``
  container's; ``env`` is upserted by name; ``resourcesPerNode`` replaces the resources it
  names (in the ``node`` job too under ``runLauncherAsNode``).
- ``spec.initializer``: ``STORAGE_URI``, ``env`` and the Secret (``envFrom``) go into the
  ``dataset-initializer`` / ``model-initializer`` containers.
- ``runtimePatches``, in order: labels and annotations are merged; pod fields are set,
  lists keyed by name are merged by name, tolerations appended; then Trainer v2.1's
  ``podTemplateOverrides`` (what Kueue v0.15 writes on admission), the same way, on the
  replicated jobs each targets.
- Run policy: ``suspend``, ``activeDeadlineSeconds`` and ``managedBy`` from the TrainJob;
  ``ttlSecondsAfterFinished`` from the runtime's JobSet; ``backoffLimit`` from the
  trainer's Job template (6 when unset, batch/v1's default); ``cleanPodPolicy`` unset
  (kubetrain's default). Pods restart as their template says (``OnFailure`` by default,
  as JobSet defaults it).
- Success: JobSet's success policy; without one, the layout's targets (MPI: the
  launcher, its nodes serve ``sshd`` and never end), else every replicated job's pods
  succeeded.

The policies live above this layer (``kubetrain.frameworks``): their callers pass the
layout in (``kubetrain.frameworks.registry.resolve_trainjob``).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from kubetrain.api.base import KubeModel
from kubetrain.api.common import JobBase, ReplicaSpec, RestartPolicy, RunPolicy
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer import elastic
from kubetrain.api.trainer.pair_rules import pair_errors
from kubetrain.api.trainer.runtime import (
    MLPolicy,
    MPIMLPolicySource,
    PodGroupPolicy,
    RuntimeBase,
    TorchMLPolicySource,
)
from kubetrain.api.trainer.trainjob import TrainJob

#: batch/v1's default backoffLimit, which a runtime's Job template inherits.
DEFAULT_BACKOFF_LIMIT = 6
LAUNCHER = "launcher"
NODE_JOB = "node"
#: The framework label value under which kubetrain gives a policy-less runtime's nodes
#: ``TF_CONFIG`` (upstream Trainer has no TensorFlow policy).
TENSORFLOW = "tensorflow"


@dataclass(frozen=True)
class NodeLayout:
    """Where a policy puts a TrainJob's nodes when the trainer job should not run them all:
    the pods of each replicated job it places, the other jobs that get ``spec.trainer``'s
    ``resourcesPerNode`` too, the jobs whose success is the TrainJob's when the runtime
    names none, and what the runtime lacks for the policy (None: nothing)."""

    pods: Mapping[str, int] = field(default_factory=dict)
    trainer_resources: tuple[str, ...] = ()
    success_targets: tuple[str, ...] | None = None
    problem: str | None = None


#: ``layout(ml_policy, replicated job names, nodes)``: a policy's :class:`NodeLayout`.
Layout = Callable[["MLPolicy", list[str], int], NodeLayout]


class Dependency(KubeModel):
    """A replicated job waits until ``name``'s pods are ``Ready`` (or ``Complete``)."""

    name: str
    status: Literal["Ready", "Complete"]


class ResolvedSpec(KubeModel):
    """What the TrainJob runs, all defaults applied (see the module docs)."""

    run_policy: RunPolicy
    replicated_jobs: dict[str, ReplicaSpec]
    #: The runtime's framework (one of ``mlPolicy``'s sources, or
    #: ``tensorflow`` from the framework label), if any.
    framework: str | None = None
    num_nodes: int = 1
    #: ``spec.trainer.numProcPerNode``, when set.
    num_proc_per_node: int | None = None
    torch: TorchMLPolicySource | None = None
    mpi: MPIMLPolicySource | None = None
    #: The replicated job whose ``node`` container ``spec.trainer`` overrides.
    trainer_job: str = NODE_JOB
    depends_on: dict[str, list[Dependency]] = Field(default_factory=dict)
    #: Each replicated job's Job ``backoffLimit`` (batch/v1's default 6 when unset): the
    #: failed pods and container restarts it allows, counted as the Job controller does.
    backoff_limits: dict[str, int] = Field(default_factory=dict)
    #: JobSet's success policy: ``All`` or ``Any`` of the target jobs completed.
    success_operator: Literal["All", "Any"] = "All"
    success_targets: list[str] = Field(default_factory=list)
    publish_not_ready: bool = True
    runtime_kind: str = T.CLUSTER_TRAINING_RUNTIME
    runtime_name: str = ""
    #: The JobSet's own labels and annotations (the runtime template's ``metadata`` and
    #: the patches' ``trainingRuntimeSpec.template.metadata``). Upstream puts them on the
    #: JobSet, which reaches no Job, pod or Service; kubetrain makes no JobSet, so no
    #: child carries them either.
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    #: The runtime's gang-scheduling policy (coscheduling or volcano), if any.
    pod_group_policy: PodGroupPolicy | None = None
    #: JobSet's ``failurePolicy.maxRestarts``: the whole gang is restarted on a failure,
    #: at most this many times (None: pods restart one by one).
    gang_max_restarts: int | None = None


class ResolvedTrainJob(JobBase):
    """A TrainJob and its runtime, as one job the operator's policies can run."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainJob"] = "TrainJob"
    spec: ResolvedSpec
    replica_specs_attr: ClassVar[str] = "replicated_jobs"

    def pods_of(self, job: str) -> int:
        """How many pods replicated job ``job`` runs."""
        spec = self.spec.replicated_jobs.get(job)
        return 0 if spec is None else (spec.replicas or 0)


def runtime_key(trainjob: TrainJob, namespace: str) -> tuple[str, str, str]:
    """``(kind, namespace, name)`` of the runtime a TrainJob names (namespace empty for a
    ClusterTrainingRuntime)."""
    ref = trainjob.spec.runtime_ref
    kind = ref.kind or T.DEFAULT_RUNTIME_KIND
    return (kind, namespace if kind == T.TRAINING_RUNTIME else "", ref.name)


def _labels(template: Mapping[str, Any]) -> dict[str, str]:
    return dict((template.get("metadata") or {}).get("labels") or {})


def trainer_job_name(runtime: RuntimeBase) -> str | None:
    """The replicated job labelled as the trainer's ancestor (None when none is)."""
    for rjob in runtime.replicated_jobs():
        if _labels(rjob.template).get(T.ANCESTOR_LABEL) == T.ANCESTOR_TRAINER:
            return rjob.name
    return None


def _merge_named(base: list[Any], extra: Iterable[Mapping[str, Any]]) -> list[Any]:
    out = [dict(item) for item in base]
    for item in extra:
        at = next((i for i, e in enumerate(out) if e.get("name") == item.get("name")), None)
        if at is None:
            out.append(dict(item))
        else:
            out[at] = dict(item)
    return out


def _patch_container(container: dict[str, Any], patch: Mapping[str, Any]) -> None:
    if "env" in patch:
        container["env"] = _merge_named(container.get("env") or [], patch["env"])
    if "volumeMounts" in patch:
        container["volumeMounts"] = _merge_named(
            container.get("volumeMounts") or [], patch["volumeMounts"]
        )
    if "securityContext" in patch:
        container["securityContext"] = copy.deepcopy(patch["securityContext"])


def _patch_pod(template: dict[str, Any], patch: Mapping[str, Any]) -> None:
    meta = patch.get("metadata") or {}
    tmeta = template.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if meta.get(key):
            tmeta[key] = {**(tmeta.get(key) or {}), **meta[key]}
    spec = patch.get("spec") or {}
    pod = template.setdefault("spec", {})
    for key in (
        "serviceAccountName",
        "securityContext",
        "affinity",
        "terminationGracePeriodSeconds",
    ):
        if key in spec:
            pod[key] = copy.deepcopy(spec[key])
    if "nodeSelector" in spec:
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **spec["nodeSelector"]}
    if "tolerations" in spec:
        pod["tolerations"] = [*(pod.get("tolerations") or []), *spec["tolerations"]]
    for key in ("volumes", "imagePullSecrets", "schedulingGates"):
        if key in spec:
            pod[key] = _merge_named(pod.get(key) or [], spec[key])
    for key in ("containers", "initContainers"):
        for cpatch in spec.get(key) or []:
            target = next((c for c in pod.get(key) or [] if c.get("name") == cpatch["name"]), None)
            if target is not None:
                _patch_container(target, cpatch)


def _container(template: dict[str, Any], name: str) -> dict[str, Any] | None:
    containers = (template.get("spec") or {}).get("containers") or []
    found: dict[str, Any] | None = next((c for c in containers if c.get("name") == name), None)
    return found


def _restart_policy(template: Mapping[str, Any]) -> RestartPolicy:
    value = (template.get("spec") or {}).get("restartPolicy") or "OnFailure"
    return RestartPolicy(value)


def _apply_trainer(template: dict[str, Any], trainjob: TrainJob, *, resources_only: bool) -> None:
    trainer = trainjob.spec.trainer
    node = _container(template, T.NODE)
    if trainer is None or node is None:
        return
    wire = trainer.to_wire()
    if not resources_only:
        for key in ("image", "command", "args"):
            if key in wire:
                node[key] = list(wire[key]) if isinstance(wire[key], list) else wire[key]
        if "env" in wire:
            node["env"] = _merge_named(node.get("env") or [], wire["env"])
    resources = wire.get("resourcesPerNode")
    if resources:
        current = node.setdefault("resources", {})
        for key in ("limits", "requests"):
            if key in resources:
                current[key] = {**(current.get(key) or {}), **resources[key]}
        if "claims" in resources:
            current["claims"] = copy.deepcopy(resources["claims"])


def _apply_initializer(template: dict[str, Any], step: str, source: Mapping[str, Any]) -> None:
    container = _container(template, step)
    if container is None:
        return
    env: list[dict[str, Any]] = []
    if source.get("storageUri"):
        env.append({"name": "STORAGE_URI", "value": source["storageUri"]})
    env += [dict(e) for e in source.get("env") or []]
    container["env"] = _merge_named(container.get("env") or [], env)
    secret = source.get("secretRef")
    if secret:
        container["envFrom"] = [*(container.get("envFrom") or []), {"secretRef": dict(secret)}]


def resolve(
    trainjob: TrainJob, runtime: RuntimeBase, layout: Layout | None = None
) -> ResolvedTrainJob:
    """``trainjob`` merged into ``runtime`` (see the module docs), its nodes where the
    policy's ``layout`` puts them; JobValidationError naming what the pair lacks (a
    trainer job, a launcher, a container, ...)."""
    errors: list[FieldError] = []
    where = f"{runtime.kind} {runtime.name}"
    policy = runtime.spec.ml_policy
    framework = policy.framework() if policy is not None else None
    labels_of_runtime = runtime.metadata.labels or {}
    if framework is None and labels_of_runtime.get(T.FRAMEWORK_LABEL) == TENSORFLOW:
        framework = TENSORFLOW  # kubetrain's extension: TF_CONFIG for the nodes
    trainer_job = trainer_job_name(runtime)
    if trainer_job is None:
        errors.append(
            FieldError(
                "spec.runtimeRef",
                f"a runtime with a replicated job labelled {T.ANCESTOR_LABEL}: "
                f"{T.ANCESTOR_TRAINER} ({where} has none)",
                trainjob.spec.runtime_ref.name,
            )
        )
        raise JobValidationError(errors)
    errors += pair_errors(trainjob, runtime) + elastic.pair_errors(trainjob, runtime)
    jobset = runtime.spec.template.spec
    nodes = elastic.start_nodes(trainjob, policy)
    names = [r.name for r in runtime.replicated_jobs()]
    placed = NodeLayout()
    if layout is not None and policy is not None:
        placed = layout(policy, names, nodes)
    if placed.problem is not None:
        errors.append(
            FieldError(
                "spec.runtimeRef",
                f"{placed.problem} ({where} has {', '.join(names)})",
                trainjob.spec.runtime_ref.name,
            )
        )
    labels = dict(((jobset_meta := runtime.spec.template.metadata) or {}).get("labels") or {})
    annotations = dict((jobset_meta or {}).get("annotations") or {})
    patches = [p.to_wire() for p in trainjob.spec.runtime_patches or []]
    for patch in patches:
        meta = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("metadata")
        labels.update((meta or {}).get("labels") or {})
        annotations.update((meta or {}).get("annotations") or {})
    initializer = trainjob.spec.initializer.to_wire() if trainjob.spec.initializer else {}
    specs: dict[str, ReplicaSpec] = {}
    depends_on: dict[str, list[Dependency]] = {}
    backoff = DEFAULT_BACKOFF_LIMIT
    backoff_limits: dict[str, int] = {}
    for rjob in runtime.replicated_jobs():
        job_template = copy.deepcopy(rjob.template)
        job_spec = job_template.get("spec") or {}
        template: dict[str, Any] = copy.deepcopy(job_spec.get("template") or {})
        for patch in patches:
            for rpatch in (
                ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
            ).get("replicatedJobs") or []:
                if rpatch.get("name") == rjob.name:
                    pod_patch = ((rpatch.get("template") or {}).get("spec") or {}).get("template")
                    _patch_pod(template, pod_patch or {})
        for override in trainjob.spec.pod_template_overrides or []:
            if any(target.name == rjob.name for target in override.target_jobs):
                _patch_pod(template, override.to_wire())
        limit = job_spec.get("backoffLimit")
        backoff_limits[rjob.name] = DEFAULT_BACKOFF_LIMIT if limit is None else int(limit)
        if rjob.name == trainer_job:
            _apply_trainer(template, trainjob, resources_only=False)
            backoff = backoff_limits[rjob.name]
        elif rjob.name in placed.trainer_resources:
            _apply_trainer(template, trainjob, resources_only=True)
        for step in T.STEP_CONTAINERS.keys() - {T.ANCESTOR_TRAINER}:
            source_key = "dataset" if step.startswith("dataset") else "model"
            if rjob.name == step and initializer.get(source_key):
                _apply_initializer(template, step, initializer[source_key])
        if rjob.name in placed.pods:
            count = placed.pods[rjob.name]
        elif rjob.name == trainer_job:
            count = nodes
        else:
            count = (rjob.replicas if rjob.replicas is not None else 1) * int(
                job_spec.get("parallelism") or 1
            )
        specs[rjob.name] = ReplicaSpec(
            replicas=max(count, 0), template=template, restart_policy=_restart_policy(template)
        )
        if rjob.depends_on:
            depends_on[rjob.name] = [
                Dependency(name=d.name, status=d.status.value) for d in rjob.depends_on
            ]
    if (
        jobset.startup_policy is not None
        and jobset.startup_policy.startup_policy_order == "InOrder"
    ):
        for before, after in itertools.pairwise(names):
            depends_on.setdefault(after, []).append(Dependency(name=before, status="Ready"))
    if errors:
        raise JobValidationError(errors)
    success = jobset.success_policy
    default_targets = list(placed.success_targets or names)
    targets = list((success.target_replicated_jobs if success else None) or default_targets)
    network = jobset.network
    publish = network.publish_not_ready_addresses if network is not None else None
    trainer = trainjob.spec.trainer
    return ResolvedTrainJob(
        metadata=trainjob.metadata,
        spec=ResolvedSpec(
            run_policy=RunPolicy(
                suspend=trainjob.spec.suspend,
                active_deadline_seconds=trainjob.spec.active_deadline_seconds,
                managed_by=trainjob.spec.managed_by,
                ttl_seconds_after_finished=jobset.ttl_seconds_after_finished,
                backoff_limit=backoff,
            ),
            replicated_jobs=specs,
            framework=framework,
            num_nodes=nodes,
            num_proc_per_node=trainer.num_proc_per_node if trainer is not None else None,
            torch=policy.torch if policy is not None else None,
            mpi=policy.mpi if policy is not None else None,
            trainer_job=trainer_job,
            depends_on=depends_on,
            backoff_limits=backoff_limits,
            success_operator="Any" if success and success.operator.value == "Any" else "All",
            success_targets=targets,
            publish_not_ready=True if publish is None else publish,
            runtime_kind=runtime.kind,
            runtime_name=runtime.name,
            labels=labels,
            annotations=annotations,
            pod_group_policy=runtime.spec.pod_group_policy,
            gang_max_restarts=(
                jobset.failure_policy.max_restarts if jobset.failure_policy is not None else None
            ),
        ),
    )
