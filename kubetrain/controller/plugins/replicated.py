"""The plugin for frameworks whose replicas are peers with their own address (PyTorchJob,
TFJob): one Pod and one headless Service (same name) per replica index,
``<job>-<type>-<index>``, as upstream's v1 engine creates them. Every framework decision
(roles, environment, start order, success) is the framework's; this module only turns
them into children and counts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.base import LabelSelector
from kubetrain.api.common import JobBase as Job
from kubetrain.api.common import JobStatus, ReplicaSpec, ReplicaStatus, RestartPolicy
from kubetrain.controller import podstate
from kubetrain.controller.model import (
    Gate,
    J,
    Loaded,
    Observed,
    Outcome,
    Replica,
    StartupRule,
)
from kubetrain.controller.plugins import autoscaler, children, v1
from kubetrain.controller.plugins.base import JobPlugin, Scaled
from kubetrain.controller.policies import success
from kubetrain.frameworks import ClusterAddressing, Framework, replica_name
from kubetrain.frameworks.elastic import Autoscaling
from kubetrain.frameworks.replicas import replicas_of


class ReplicatedPlugin(JobPlugin[J]):
    """Reconciles the jobs of one framework whose replicas each get a Pod and a Service."""

    #: ConfigMap: the progress server's CA bundle, for a job that reports progress.
    child_kinds: tuple[str, ...] = ("Pod", "Service", "ConfigMap")

    def __init__(
        self,
        framework: Framework,
        job_type: type[J],
        addressing: ClusterAddressing | None = None,
    ) -> None:
        self.framework = framework
        self.job_type = job_type
        self.kind = framework.info.kind
        self.addressing = addressing or ClusterAddressing()
        if hasattr(framework, "autoscaling"):
            self.child_kinds = (*self.child_kinds, autoscaler.KIND)

    def load(self, raw: Mapping[str, Any], observed: Observed) -> Loaded[J]:
        return v1.load(raw, self.validate, self.job_type)

    def replicas(self, job: J) -> list[Replica]:
        """One Replica per index of each replica type, leaders first."""
        info = self.framework.info
        order = info.replica_types
        specs = job.replica_specs()
        out: list[Replica] = []
        for rtype in sorted(specs, key=lambda t: order.index(t) if t in order else len(order)):
            spec = specs[rtype]
            policy = spec.restart_policy or RestartPolicy(info.default_restart_policy(rtype))
            for index in range(replicas_of(spec)):
                out.append(
                    Replica(
                        replica_type=rtype,
                        index=index,
                        pod_name=replica_name(job.name, rtype, index),
                        restart_policy=policy,
                        main_container=info.main_container or "",
                    )
                )
        return out

    def autoscaling(self, job: J) -> Autoscaling | None:
        """The framework's autoscaler for ``job`` (PyTorch's ``elasticPolicy.metrics``)."""
        scaling = getattr(self.framework, "autoscaling", None)
        return scaling(job) if scaling is not None else None

    def scaled(self, job: J, observed: Observed) -> Scaled | None:
        """The replica type behind the kind's scale subresource (a PyTorchJob's Workers):
        its count, and its Services there (one per replica, kept across pod restarts)."""
        rtype = self.framework.info.scale_replica_type
        if rtype is None:
            return None
        wanted = rtype.lower()
        present = sum(
            1
            for svc in observed.services.values()
            if ((svc.get("metadata") or {}).get("labels") or {}).get(K.REPLICA_TYPE) == wanted
            and not podstate.is_deleting(svc)
        )
        scaling = self.autoscaling(job)
        unit = scaling.unit if scaling is not None else f"{wanted}s"
        count = replicas_of(job.replica_specs().get(rtype))
        return Scaled(key=rtype, count=count, present=present, unit=unit)

    def tolerates_failure(self, job: J, replica: Replica) -> bool:
        tolerates = getattr(self.framework, "tolerates_failure", None)
        return bool(tolerates(job, replica.replica_type)) if tolerates else False

    def startup_rules(self, job: J) -> list[StartupRule]:
        """The framework's start order, on each needed replica's Pod and Service (none
        under gang scheduling: the gang starts together)."""
        if self.gang_of(job) is not None:
            return []
        rules = []
        for order in self.framework.start_order(job):
            names = tuple(replica_name(job.name, t, i) for t, i in order.needed)
            rules.append(
                StartupRule(
                    waiting=order.waiting,
                    needed_pods=names,
                    needed_services=names,
                    waiting_label=order.waiting_label,
                    needed_label=order.needed_label,
                )
            )
        return rules

    def build(self, job: J, observed: Observed, gate: Gate) -> Iterator[dict[str, Any]]:
        """A pod and a headless Service per replica; pods of gated replica types are left
        out (their Services are created at once: names resolve once the pods are Ready)."""
        specs = job.replica_specs()
        for replica in self.replicas(job):
            spec: ReplicaSpec = specs[replica.replica_type]
            role = self.framework.role(job, replica.replica_type, replica.index)
            labels = children.replica_labels(job, replica.replica_type, replica.index, role)
            template = children.pod_template(
                spec,
                labels=labels,
                restart_policy=children.pod_restart_policy(replica.restart_policy),
                env_for=lambda _i, c, r=replica: self.framework.container_env(  # type: ignore[misc]
                    job, r.replica_type, r.index, c, self.addressing
                ),
            )
            if replica.replica_type not in gate.blocked:
                yield children.with_hash(children.pod(job, replica.pod_name, template))
            selector = {
                k: labels[k] for k in (K.OPERATOR_NAME, K.JOB_NAME, K.REPLICA_TYPE, K.REPLICA_INDEX)
            }
            service = children.headless_service(
                job,
                replica.pod_name,
                labels=labels,
                selector=selector,
                ports=children.service_ports(template["spec"], replica.main_container),
                # A rank's name resolves while its container restarts in place (not
                # Ready): its peers, restarted too, find it at once (upstream's does not).
                publish_not_ready=True,
            )
            yield children.with_hash(service)
        scaling = self.autoscaling(job)
        if scaling is not None:
            yield autoscaler.hpa(job, scaling)

    def status(self, job: J, observed: Observed) -> JobStatus:
        """A JobStatus holding only the replica counts."""
        return JobStatus(replica_statuses=replica_statuses(job, self.replicas(job), observed))

    def is_running(self, job: J, observed: Observed) -> bool:
        """Every replica has its pod, none is pending or failed, and at least one runs."""
        pods = [observed.pods.get(r.pod_name) for r in self.replicas(job)]
        if not pods or any(p is None for p in pods):
            return False
        present = [p for p in pods if p is not None]
        if not all(podstate.is_running(p) or podstate.is_succeeded(p) for p in present):
            return False
        return any(podstate.is_running(p) for p in present)

    def outcome(self, job: J, observed: Observed) -> Outcome | None:
        """The framework's success rule, answered from the pods."""
        return success.from_pods(self.framework, job, observed)


def replica_statuses(
    job: Job, replicas: Sequence[Replica], observed: Observed
) -> dict[str, ReplicaStatus]:
    """active / succeeded / failed pods and the selector, per replica type."""
    out: dict[str, ReplicaStatus] = {}
    for rtype in dict.fromkeys(r.replica_type for r in replicas):
        active = succeeded = failed = 0
        for replica in replicas:
            if replica.replica_type != rtype:
                continue
            pod = observed.pods.get(replica.pod_name)
            if pod is None:
                continue
            if podstate.is_succeeded(pod):
                succeeded += 1
            elif podstate.is_failed(pod):
                failed += 1
            elif podstate.is_active(pod):
                active += 1
        match = {
            k: v for k, v in children.replica_labels(job, rtype, 0).items() if k != K.REPLICA_INDEX
        }
        selector: LabelSelector = {"matchLabels": match}
        out[rtype] = ReplicaStatus(
            active=active,
            succeeded=succeeded,
            failed=failed,
            label_selector=selector,
            selector=K.job_selector(job.kind, job.name, rtype),
        )
    return out
