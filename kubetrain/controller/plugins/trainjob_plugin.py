"""The TrainJob (Kubeflow Trainer v2) plugin: a TrainJob resolved against its runtime runs
with the same policies as the v1 kinds (startup gating, restarts, deadlines, TTL,
suspend, cleanup), and its children are made directly, no JobSet needed:

- ConfigMap ``<trainjob>-runtime-snapshot``: the runtime as it was at the job's first
  reconcile, which the job is built from ever after (``runtime_snapshot``);
- Service ``<trainjob>``: headless, selecting the TrainJob's pods (JobSet's Service);
- one pod per (replicated job, index), named and host-named ``<trainjob>-<job>-0-<i>``
  with subdomain ``<trainjob>``, carrying the labels the Kubeflow SDK reads
  (``jobset.sigs.k8s.io/jobset-name``, ``.../replicatedjob-name``,
  ``batch.kubernetes.io/job-completion-index``) and kubetrain's own. The name is the
  slot: a failed pod is deleted before its replacement is created, so there are never two
  live pods for one (job, index) (the SDK shows the first it lists);
- MPI: an SSH key pair in a Secret ``<trainjob>-mpi-ssh-<suffix from the uid>`` (its
  name recorded in ``status.kubetrain``), the hostfile in ConfigMap
  ``<trainjob>-mpi-hostfile`` mounted at ``/etc/mpi`` in the launcher, the keys at
  ``sshAuthMountPath`` in every ``node`` container; the launcher starts once the nodes
  are Ready when the runtime says so (``dependsOn``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.common import JobBase as Job
from kubetrain.api.common import JobStatus, ReplicaStatus, RestartPolicy
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.mpi import DEFAULT_SSH_AUTH_MOUNT_PATH
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer import patch_times
from kubetrain.api.trainer.defaults import apply_trainer_defaults
from kubetrain.api.trainer.loader import load_trainer_object
from kubetrain.api.trainer.resolve import (
    LAUNCHER,
    NODE_JOB,
    ResolvedTrainJob,
)
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.controller import gang as G
from kubetrain.controller import podstate
from kubetrain.controller.conditions import parse_time
from kubetrain.controller.model import Gate, Loaded, Observed, Outcome, Replica, StartupRule
from kubetrain.controller.plugins import autoscaler, children, quota, runtime_snapshot, v1
from kubetrain.controller.plugins.base import JobPlugin, Scaled, StatusCodec
from kubetrain.controller.plugins.mpi_children import MpiChildren, config_map
from kubetrain.controller.plugins.trainjob_status import CODEC
from kubetrain.controller.policies import success
from kubetrain.frameworks import mpi, trainjob
from kubetrain.frameworks.addressing import trainjob_pod_name
from kubetrain.frameworks.elastic import Autoscaling
from kubetrain.frameworks.mpi_pods import TRAINJOB_LAYOUT, mount
from kubetrain.frameworks.pytorch import trainjob_autoscaling, trainjob_elastic
from kubetrain.frameworks.registry import policy_for, resolve_trainjob

#: How long a TrainJob waits for the runtime it names to appear before it fails.
RUNTIME_WAIT_SECONDS = 30.0


def hostfile_name(job: Job) -> str:
    return f"{job.name}-mpi-hostfile"


def secret_prefix(job: Job) -> str:
    return f"{job.name}-mpi-ssh-"


def _created_ago(raw: Mapping[str, Any], observed: Observed) -> float:
    created = parse_time(str((raw.get("metadata") or {}).get("creationTimestamp") or ""))
    return (observed.now - created).total_seconds() if created is not None else 0.0


class TrainJobPlugin(MpiChildren, JobPlugin[ResolvedTrainJob]):
    """Reconciles ``trainer.kubeflow.org/v1alpha1`` TrainJobs (see the module docs)."""

    kind = trainjob.FRAMEWORK.info.kind
    framework = trainjob.FRAMEWORK
    #: Secrets are created, never watched (their names are in the status).
    child_kinds: tuple[str, ...] = ("Pod", "Service", "ConfigMap", autoscaler.KIND)
    #: As upstream's JobSet TTL: the pods and Services go, the TrainJob and status stay.
    ttl_deletes = "children"
    counts_failed_replica = True
    status_codec: StatusCodec = CODEC
    #: Where trainer pods report progress (None: the progress server is off).

    # -- reading ------------------------------------------------------------------------

    def load(self, raw: Mapping[str, Any], observed: Observed) -> Loaded[ResolvedTrainJob]:
        """The TrainJob resolved against its runtime: the one pinned in its snapshot, or
        (first reconcile) the live one, then pinned; a runtime not found fails the job
        with ``RuntimeNotFound`` once it had time to appear."""
        try:
            declared = load_trainer_object(v1.body_of(raw))
        except JobValidationError as err:
            return Loaded(None, errors=list(err.errors))
        if not isinstance(declared, TrainJob):
            return Loaded(None, errors=[FieldError("kind", "TrainJob", raw.get("kind"))])
        job = apply_trainer_defaults(declared)
        ref = job.spec.runtime_ref
        source = observed.runtime
        if observed.runtime_snapshot is not None:
            source, problem = runtime_snapshot.read(
                observed.runtime_snapshot,
                job.name,
                (ref.kind or T.DEFAULT_RUNTIME_KIND, ref.name),
            )
            if problem is not None:
                return Loaded(None, errors=[problem])
        if source is None:
            where = f"{ref.kind} {ref.name}" + (
                f" in namespace {job.metadata.namespace}" if ref.kind == T.TRAINING_RUNTIME else ""
            )
            missing = FieldError("spec.runtimeRef", f"an existing runtime: {where} does not exist")
            waited = _created_ago(raw, observed)
            if waited < RUNTIME_WAIT_SECONDS:
                return Loaded(
                    None, errors=[missing], retry_after=min(5.0, RUNTIME_WAIT_SECONDS - waited)
                )
            return Loaded(None, errors=[missing], reason=K.RUNTIME_NOT_FOUND)
        try:
            runtime = load_trainer_object(v1.body_of(source))
            if not isinstance(runtime, RuntimeBase):
                raise JobValidationError([FieldError("kind", "a runtime", runtime.kind)])
            resolved = resolve_trainjob(job, apply_trainer_defaults(runtime))
        except JobValidationError as err:
            return Loaded(None, errors=list(err.errors))
        mismatch = G.check_backend(resolved, self.gang)
        if mismatch:
            return Loaded(None, errors=mismatch, reason=K.GANG_SCHEDULER_UNAVAILABLE)
        policy = resolved.run_policy.clean_pod_policy if resolved.run_policy else None
        pinned: tuple[dict[str, Any], ...] = ()
        if observed.runtime_snapshot is None:
            pinned = (runtime_snapshot.config_map(resolved, source),)
        return Loaded(resolved, declared_clean_pod_policy=policy, pinned=pinned)

    def gang_of(self, job: ResolvedTrainJob) -> G.Gang | None:
        """A TrainJob whose runtime has a ``podGroupPolicy`` is one gang of the pods that
        run together: every replicated job but those others wait to Complete (the
        initializers, which finish before the trainer starts)."""
        before = {
            d.name for deps in job.spec.depends_on.values() for d in deps if d.status == "Complete"
        }
        members = [name for name in job.spec.replicated_jobs if name not in before]
        return G.gang_of(job, self.gang, members)

    def backoff_limits(self, job: ResolvedTrainJob) -> dict[str, int]:
        """Each replicated job's Job backoffLimit, counted as the Job controller does."""
        return dict(job.spec.backoff_limits)

    def spec_stamp(self, raw: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
        """runtimePatches' times (``kubetrain.api.trainer.patch_times``)."""
        return patch_times.json_patch(raw, now)

    def scaled(self, job: ResolvedTrainJob, observed: Observed) -> Scaled | None:
        """An elastic TrainJob's nodes (its trainer job's pods): ``numNodes``, and the node
        pods there (None: not elastic)."""
        if trainjob_elastic(job) is None:
            return None
        key = job.spec.trainer_job
        present = sum(
            1
            for pod in observed.pods.values()
            if ((pod.get("metadata") or {}).get("labels") or {}).get(K.REPLICA_TYPE) == key
            and not podstate.is_deleting(pod)
        )
        return Scaled(key=key, count=job.pods_of(key), present=present, unit="nodes")

    def autoscaling(self, job: ResolvedTrainJob) -> Autoscaling | None:
        """The HPA of an elastic TrainJob whose runtime names ``metrics``."""
        return trainjob_autoscaling(job)

    def replicas(self, job: ResolvedTrainJob) -> list[Replica]:
        return [
            Replica(
                replica_type=name,
                index=index,
                pod_name=pod_name,
                restart_policy=job.spec.replicated_jobs[name].restart_policy
                or RestartPolicy.ON_FAILURE,
                main_container=str(self.framework.run_container(job, name)),
            )
            for name, index, pod_name in trainjob.pod_names(job)
        ]

    def startup_rules(self, job: ResolvedTrainJob) -> list[StartupRule]:
        """The runtime's start order (only the waits for initializers to Complete under
        gang scheduling: the trainer's pods start together)."""
        gang = self.gang_of(job) is not None
        return [
            StartupRule(
                waiting=order.waiting,
                needed_pods=tuple(trainjob_pod_name(job.name, t, i) for t, i in order.needed),
                needed_services=(job.name,),
                waiting_label=order.waiting_label,
                needed_label=order.needed_label,
                until=order.until,
            )
            for order in self.framework.start_order(job)
            if not (gang and order.until == "Ready")
        ]

    # -- children -----------------------------------------------------------------------

    def build(
        self, job: ResolvedTrainJob, observed: Observed, gate: Gate
    ) -> Iterator[dict[str, Any]]:
        yield children.with_hash(self._service(job))
        if self.progress is not None:
            yield children.with_hash(self.progress.config_map(job))
        secret: str | None = None
        if job.spec.mpi is not None:
            yield children.with_hash(self._hostfile(job))
            secret = self.ssh_secret_name(job, observed, secret_prefix(job))
            # Created first and alone (reconciler).
            yield from self.ssh_secret(job, observed, secret, children.job_labels(job))
        admitted = quota.admitted_nodes(job, observed.pods)
        nodes = job.spec.trainer_job
        for replica in self.replicas(job):
            if replica.replica_type in gate.blocked:
                continue
            if admitted is None or replica.replica_type != nodes:
                yield children.with_hash(self._pod(job, replica, secret))
            elif replica.index < admitted:
                # Under Kueue: the count it admitted (plugins/quota.py).
                pod = self._pod(job, replica, secret)
                recorded = str(min(admitted, job.pods_of(nodes)))
                pod["metadata"]["annotations"][K.ADMITTED_NODES_ANNOTATION] = recorded
                yield children.with_hash(pod)
        scaling = self.autoscaling(job)
        if scaling is not None:
            yield autoscaler.hpa(job, scaling)

    def _labels(self, job: Job, replicated_job: str, index: int) -> dict[str, str]:
        labels = children.replica_labels(job, replicated_job, index)
        labels[K.REPLICA_TYPE] = replicated_job  # kept as the runtime spells it
        labels.update(
            {
                K.JOBSET_NAME_LABEL: job.name,
                K.JOBSET_REPLICATED_JOB_LABEL: replicated_job,
                K.JOBSET_JOB_INDEX_LABEL: "0",
                K.JOB_COMPLETION_INDEX: str(index),
            }
        )
        return labels

    def _service(self, job: ResolvedTrainJob) -> dict[str, Any]:
        service = children.headless_service(
            job,
            job.name,
            labels=children.job_labels(job),
            selector={K.JOBSET_NAME_LABEL: job.name, **children.job_labels(job)},
            ports=[],
            publish_not_ready=job.spec.publish_not_ready,
        )
        return service

    def _pod(self, job: ResolvedTrainJob, replica: Replica, secret: str | None) -> dict[str, Any]:
        spec = job.spec.replicated_jobs[replica.replica_type]
        labels = self._labels(job, replica.replica_type, replica.index)
        template = children.pod_template(
            spec,
            labels=labels,
            restart_policy=children.pod_restart_policy(replica.restart_policy),
            env_for=lambda _i, c: self.framework.container_env(
                job, replica.replica_type, replica.index, c, self.addressing
            ),
        )
        meta = template["metadata"]
        meta["annotations"] = {
            **meta["annotations"],
            K.JOB_COMPLETION_INDEX: str(replica.index),
        }
        pod_spec = template["spec"]
        for key in ("initContainers", "containers"):
            if pod_spec.get(key):
                pod_spec[key] = [trainjob.with_completion_index(c) for c in pod_spec[key]]
        pod_spec["hostname"] = replica.pod_name
        pod_spec["subdomain"] = job.name
        trainer = replica.replica_type == job.spec.trainer_job
        policy = policy_for(job.spec.framework)
        # The port a node listens on for its peers (the policy's rank port).
        rank_port = policy.rank_port if policy is not None and trainer else None
        for container in pod_spec.get("containers") or []:
            if container.get("name") != T.NODE:
                continue
            port = rank_port
            if port is not None:
                ports = container.setdefault("ports", [])
                if not any(p.get("containerPort") == port for p in ports):
                    ports.append({"containerPort": port, "protocol": "TCP"})
        if job.spec.mpi is not None and secret is not None:
            self._mount_mpi(job, replica.replica_type, pod_spec, secret)
        if trainer and self.progress is not None:
            self.progress.inject(job, pod_spec)
        return children.pod(job, replica.pod_name, template)

    def _mount_mpi(
        self, job: ResolvedTrainJob, replicated_job: str, pod_spec: dict[str, Any], secret: str
    ) -> None:
        assert job.spec.mpi is not None
        mount(
            pod_spec,
            TRAINJOB_LAYOUT,
            secret=secret,
            ssh_path=job.spec.mpi.ssh_auth_mount_path or DEFAULT_SSH_AUTH_MOUNT_PATH,
            config_map=hostfile_name(job) if replicated_job == LAUNCHER else None,
            containers=[c for c in pod_spec.get("containers") or [] if c.get("name") == T.NODE],
        )

    def _hostfile(self, job: ResolvedTrainJob) -> dict[str, Any]:
        data = {mpi.HOSTFILE: mpi.trainjob_hostfile(job, self.addressing)}
        return config_map(job, hostfile_name(job), children.job_labels(job), data)

    # -- status -------------------------------------------------------------------------

    def status(self, job: ResolvedTrainJob, observed: Observed) -> JobStatus:
        out: dict[str, ReplicaStatus] = {}
        for replica in self.replicas(job):
            counts = out.setdefault(
                replica.replica_type, ReplicaStatus(active=0, succeeded=0, failed=0)
            )
            pod = observed.pods.get(replica.pod_name)
            if pod is None:
                continue
            field = (
                "succeeded"
                if podstate.is_succeeded(pod)
                else "failed"
                if podstate.is_failed(pod)
                else "active"
                if podstate.is_active(pod)
                else None
            )
            if field is not None:
                out[replica.replica_type] = counts.model_copy(
                    update={field: (getattr(counts, field) or 0) + 1}
                )
        return JobStatus(replica_statuses=out)

    def outcome(self, job: ResolvedTrainJob, observed: Observed) -> Outcome | None:
        """JobSet's success policy, answered from the pods."""
        return success.from_pods(self.framework, job, observed, pod_name=trainjob_pod_name)

    def is_running(self, job: ResolvedTrainJob, observed: Observed) -> bool:
        """Every pod of the trainer (and MPI node) jobs runs or has finished."""
        names = [job.spec.trainer_job]
        if job.spec.mpi is not None:
            names = [LAUNCHER, NODE_JOB]
        pods = [
            observed.pods.get(trainjob_pod_name(job.name, n, i))
            for n in names
            for i in range(job.pods_of(n))
        ]
        if not pods or any(p is None for p in pods):
            return False
        present = [p for p in pods if p is not None]
        return all(podstate.is_running(p) or podstate.is_succeeded(p) for p in present) and any(
            podstate.is_running(p) for p in present
        )


def runtime_ref(raw: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(kind, namespace, name)`` of the runtime a raw TrainJob names (namespace empty for
    a ClusterTrainingRuntime); None when it names none."""
    ref = (raw.get("spec") or {}).get("runtimeRef") or {}
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        return None
    kind = ref.get("kind") or T.DEFAULT_RUNTIME_KIND
    namespace = str((raw.get("metadata") or {}).get("namespace") or "")
    return (str(kind), namespace if kind == T.TRAINING_RUNTIME else "", name)
