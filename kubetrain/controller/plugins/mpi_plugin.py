"""The MPIJob (v2beta1) plugin: upstream mpi-operator's children, built purely.

- Service ``<job>``: headless, selects the job's pods (workers are
  ``<job>-worker-<i>.<job>.<ns>.svc``, the launcher ``<job>-launcher.<job>.<ns>.svc``);
- ConfigMap ``<job>-config``: ``hostfile`` (``mpi.hostfile``) and ``discover_hosts.sh``
  (the hosts that can take ranks now, for Horovod elastic);
- Secret ``<job>-ssh-<suffix>``: an SSH key pair generated once (``kubernetes.io/ssh-auth``),
  its name recorded in ``status.sshAuthSecretName``
  (:mod:`~kubetrain.controller.plugins.mpi_children`), mounted in every pod and the
  ConfigMap in the launcher as mpi-operator does (:mod:`kubetrain.frameworks.mpi_pods`);
- worker Pods ``<job>-worker-<i>`` (hostname + subdomain, ``sshd -De`` by default, and
  the DNS search domain ``<job>.<ns>.svc.cluster.local`` so that Intel MPI's and MPICH's
  Hydra proxies reach the launcher by its bare host name);
- the launcher as a batch/v1 Job ``<job>-launcher`` (pod host name ``<job>-launcher``,
  subdomain ``<job>``; ``backoffLimit`` and ``ttlSecondsAfterFinished`` from the run
  policy, as upstream). With ``launcherCreationPolicy: AtStartup`` (the default) the Job
  is created with the workers and its pod carries the ``kubetrain.dev/startup``
  scheduling gate, which the operator removes once every worker is Ready; with
  ``WaitForWorkersReady`` the Job itself is created only then. Either way ``mpirun``
  never starts before its workers can be reached.

Every child but the pods also carries upstream's ``app: <job>`` label.

Success and failure come from the launcher Job's Complete and Failed conditions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.base import LabelSelector
from kubetrain.api.common import JobBase as Job
from kubetrain.api.common import (
    JobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
)
from kubetrain.api.errors import FieldError
from kubetrain.api.mpi import (
    DEFAULT_SSH_AUTH_MOUNT_PATH,
    LauncherCreationPolicy,
    MPIJob,
    MPIReplicaType,
)
from kubetrain.controller import podstate
from kubetrain.controller.model import (
    Gate,
    Loaded,
    Obj,
    Observed,
    Outcome,
    Replica,
    StartupRule,
)
from kubetrain.controller.plugins import children, v1
from kubetrain.controller.plugins.base import JobPlugin
from kubetrain.controller.plugins.mpi_children import MpiChildren, config_map
from kubetrain.controller.policies import success
from kubetrain.frameworks import mpi, replica_name
from kubetrain.frameworks.mpi_pods import DISCOVER_HOSTS, MPIJOB_LAYOUT, mount
from kubetrain.frameworks.replicas import replicas_of

LAUNCHER = MPIReplicaType.LAUNCHER.value
WORKER = MPIReplicaType.WORKER.value
DEFAULT_WORKER_COMMAND = ["/usr/sbin/sshd", "-De"]


def service_name(job: Job) -> str:
    """The job's headless Service: ``<job>``."""
    return job.name


def config_map_name(job: Job) -> str:
    """``<job>-config`` (hostfile, discover_hosts.sh)."""
    return f"{job.name}-config"


def secret_prefix(job: Job) -> str:
    """``<job>-ssh-``: the SSH key pair's Secret is this and a suffix from the job's uid."""
    return f"{job.name}-ssh-"


def launcher_name(job: Job) -> str:
    """``<job>-launcher`` (the batch Job, and its pod's host name)."""
    return mpi.launcher_hostname(job.name)


def child_labels(job: Job) -> dict[str, str]:
    """The labels of the job's Service, ConfigMap, Secret and launcher Job: the job's,
    and upstream's ``app: <job>``."""
    return {**children.job_labels(job), K.APP: job.name}


def waits_at_startup(job: MPIJob) -> bool:
    """Whether the launcher Job is created with the workers (``AtStartup``, the
    default), its pod gated until they are Ready."""
    return job.spec.launcher_creation_policy is not LauncherCreationPolicy.WAIT_FOR_WORKERS_READY


def launcher_pods(job: Job, observed: Observed) -> list[Obj]:
    """The launcher Job's pods (named by the Job controller), oldest first."""
    found = [
        pod
        for pod in observed.pods.values()
        if ((pod.get("metadata") or {}).get("labels") or {}).get(K.JOB_ROLE) == LAUNCHER.lower()
    ]
    return sorted(found, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp")))


class MPIPlugin(MpiChildren, JobPlugin[MPIJob]):
    """Reconciles ``kubeflow.org/v2beta1`` MPIJobs."""

    kind = mpi.FRAMEWORK.info.kind
    framework = mpi.FRAMEWORK
    #: Secrets are never watched, listed or read: the operator may only create them, and
    #: knows its own from the job's status.
    child_kinds: tuple[str, ...] = ("Pod", "Service", "ConfigMap", "Job")
    #: As upstream: the TTL removes the launcher Job; the MPIJob and its status stay.
    ttl_deletes = "launcher"

    # -- capabilities ----------------------------------------------------------------

    def load(self, raw: Mapping[str, Any], observed: Observed) -> Loaded[MPIJob]:
        return v1.load(raw, self.validate, MPIJob)

    def validate(self, job: MPIJob) -> list[FieldError]:
        errors = []
        for rtype in (LAUNCHER, WORKER):
            spec = job.replica_specs().get(rtype)
            policy = spec.restart_policy if spec else None
            if policy is not None and policy not in (RestartPolicy.NEVER, RestartPolicy.ON_FAILURE):
                errors.append(
                    FieldError(
                        f"spec.mpiReplicaSpecs.{rtype}.restartPolicy",
                        "Never or OnFailure (an MPIJob's launcher is a batch Job)",
                        policy.value,
                    )
                )
        return errors

    def replicas(self, job: MPIJob) -> list[Replica]:
        spec = job.replica_specs().get(WORKER)
        policy = (spec.restart_policy if spec else None) or RestartPolicy.NEVER
        return [
            Replica(
                replica_type=WORKER,
                index=i,
                pod_name=replica_name(job.name, WORKER, i),
                restart_policy=policy,
                main_container="",
            )
            for i in range(replicas_of(spec))
        ]

    def startup_rules(self, job: MPIJob) -> list[StartupRule]:
        """The framework's start order: the workers' pods, reached through the job's
        Service (none under gang scheduling: the launcher is a member of the gang)."""
        if self.gang_of(job) is not None:
            return []
        return [
            StartupRule(
                waiting=order.waiting,
                needed_pods=tuple(replica_name(job.name, t, i) for t, i in order.needed),
                needed_services=(service_name(job),),
                waiting_label=order.waiting_label,
                needed_label=order.needed_label,
            )
            for order in self.framework.start_order(job)
        ]

    def build(self, job: MPIJob, observed: Observed, gate: Gate) -> Iterator[dict[str, Any]]:
        yield children.with_hash(self._service(job))
        yield children.with_hash(self._config_map(job, observed))
        secret = self.ssh_secret_name(job, observed, secret_prefix(job))
        # Created first and alone (reconciler).
        yield from self.ssh_secret(job, observed, secret, child_labels(job))
        for replica in self.replicas(job):
            yield children.with_hash(self._worker(job, replica, secret))
        blocked = LAUNCHER in gate.blocked
        if not blocked or waits_at_startup(job):
            # Gated when created before its workers are Ready; the startup policy lifts
            # the gate. A launcher Job created later needs none.
            yield children.with_hash(self._launcher(job, secret, gated=blocked))

    def status(self, job: MPIJob, observed: Observed) -> JobStatus:
        workers = self.replicas(job)
        statuses: dict[str, ReplicaStatus] = {}
        launcher = launcher_pods(job, observed)
        statuses[LAUNCHER] = self._replica_status(job, LAUNCHER, launcher)
        pods = [observed.pods[r.pod_name] for r in workers if r.pod_name in observed.pods]
        statuses[WORKER] = self._replica_status(job, WORKER, pods)
        return JobStatus(replica_statuses=statuses)

    def outcome(self, job: MPIJob, observed: Observed) -> Outcome | None:
        return success.mpi(
            job, observed.batch_jobs.get(launcher_name(job)), launcher_pods(job, observed)
        )

    def is_running(self, job: MPIJob, observed: Observed) -> bool:
        workers = self.replicas(job)
        if not all(
            r.pod_name in observed.pods and podstate.is_running(observed.pods[r.pod_name])
            for r in workers
        ):
            return False
        return any(podstate.is_running(p) for p in launcher_pods(job, observed))

    # -- children ----------------------------------------------------------------------

    def _replica_status(self, job: Job, rtype: str, pods: list[Obj]) -> ReplicaStatus:
        match = {**K.job_labels(self.kind, job.name), K.REPLICA_TYPE: rtype.lower()}
        selector: LabelSelector = {"matchLabels": match}
        return ReplicaStatus(
            active=sum(1 for p in pods if podstate.is_active(p)),
            succeeded=sum(1 for p in pods if podstate.is_succeeded(p)),
            failed=sum(1 for p in pods if podstate.is_failed(p)),
            label_selector=selector,
            selector=K.job_selector(self.kind, job.name, rtype),
        )

    def _service(self, job: MPIJob) -> dict[str, Any]:
        return children.headless_service(
            job,
            service_name(job),
            labels=child_labels(job),
            selector=children.job_labels(job),
            ports=[],
            publish_not_ready=bool(job.spec.run_launcher_as_worker),
        )

    def _config_map(self, job: MPIJob, observed: Observed) -> dict[str, Any]:
        running = [
            r.index
            for r in self.replicas(job)
            if r.pod_name in observed.pods and podstate.is_running(observed.pods[r.pod_name])
        ]
        data = {
            mpi.HOSTFILE: mpi.hostfile(job, self.addressing),
            DISCOVER_HOSTS: mpi.discover_hosts(job, self.addressing, running),
        }
        return config_map(job, config_map_name(job), child_labels(job), data)

    def _template(
        self,
        job: MPIJob,
        spec: ReplicaSpec,
        labels: dict[str, str],
        restart_policy: str,
        env: list[Any],
        *,
        launcher: bool,
        secret: str,
    ) -> dict[str, Any]:
        template = children.pod_template(
            spec,
            labels=labels,
            restart_policy=restart_policy,
            env_for=lambda i, c: env if i == 0 else [],
        )
        pod_spec = template["spec"]
        mount(
            pod_spec,
            MPIJOB_LAYOUT,
            secret=secret,
            ssh_path=job.spec.ssh_auth_mount_path or DEFAULT_SSH_AUTH_MOUNT_PATH,
            config_map=config_map_name(job) if launcher else None,
            containers=(pod_spec.get("containers") or [])[:1],
        )
        return template

    def _worker(self, job: MPIJob, replica: Replica, secret: str) -> dict[str, Any]:
        spec = job.replica_specs()[WORKER]
        offset = 1 if job.spec.run_launcher_as_worker else 0
        labels = children.replica_labels(
            job, WORKER, replica.index + offset, self.framework.role(job, WORKER, replica.index)
        )
        template = self._template(
            job,
            spec,
            labels,
            children.pod_restart_policy(replica.restart_policy),
            list(mpi.worker_env(job)),
            launcher=False,
            secret=secret,
        )
        pod_spec = template["spec"]
        _address(pod_spec, replica.pod_name, service_name(job))
        # Hydra proxies (Intel MPI, MPICH) on the workers connect back to the launcher by
        # its bare host name: resolve it through the job's Service domain.
        dns = pod_spec.setdefault("dnsConfig", {})
        search = self.addressing.dns_search(job.name, children.namespace_of(job))
        dns["searches"] = [*[s for s in dns.get("searches") or [] if s != search], search]
        first = (pod_spec.get("containers") or [{}])[0]
        if first and not first.get("command") and not first.get("args"):
            first["command"] = list(DEFAULT_WORKER_COMMAND)
        return children.pod(job, replica.pod_name, template)

    def _launcher(self, job: MPIJob, secret: str, *, gated: bool) -> dict[str, Any]:
        spec = job.replica_specs()[LAUNCHER]
        role = self.framework.role(job, LAUNCHER, 0)
        labels = children.replica_labels(job, LAUNCHER, 0, role)
        if not job.spec.run_launcher_as_worker:
            # It runs no rank: no index to collide with worker 0's (with ranks it is 0
            # and the workers count from 1, so every pod's index is distinct).
            del labels[K.REPLICA_INDEX]
        policy = spec.restart_policy or RestartPolicy.ON_FAILURE
        template = self._template(
            job,
            spec,
            labels,
            "Never" if policy == RestartPolicy.NEVER else "OnFailure",
            list(mpi.launcher_env(job)),
            launcher=True,
            secret=secret,
        )
        _address(template["spec"], launcher_name(job), service_name(job))
        if gated:
            gates = [
                g
                for g in template["spec"].get("schedulingGates") or []
                if g.get("name") != K.STARTUP_GATE
            ]
            template["spec"]["schedulingGates"] = [*gates, {"name": K.STARTUP_GATE}]
        return children.batch_job(job, launcher_name(job), child_labels(job), template)


def _address(pod_spec: dict[str, Any], hostname: str, subdomain: str) -> None:
    """Host name and subdomain (the job's Service); with the host network, cluster DNS
    still resolves the job's names."""
    pod_spec["hostname"] = hostname
    pod_spec["subdomain"] = subdomain
    if pod_spec.get("hostNetwork"):
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
