"""What PyTorchJob and TFJob share: one Pod and one headless Service (same name) per
replica index, ``<job>-<type>-<index>``, as upstream's v1 engine creates them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubetrain.api.base import LabelSelector
from kubetrain.api.common import JobBase, JobStatus, ReplicaSpec, ReplicaStatus, RestartPolicy
from kubetrain.controller import labels as L
from kubetrain.controller import podstate
from kubetrain.controller.plugins import children
from kubetrain.controller.plugins.addressing import EnvVar
from kubetrain.controller.plugins.base import Observed, Replica, StartupRule
from kubetrain.controller.plugins.common import replicas_of
from kubetrain.controller.policies import startup

#: ``env_for(replica, container index, container)``: the variables one container gets.
EnvFor = Callable[[Replica, int, dict[str, Any]], list[EnvVar]]


def replica_list(
    job: JobBase, order: Sequence[str], main_container: str, default_policy: RestartPolicy
) -> list[Replica]:
    """One Replica per index of each replica type, in ``order``."""
    specs = job.replica_specs()
    out: list[Replica] = []
    for rtype in sorted(specs, key=lambda t: order.index(t) if t in order else len(order)):
        spec = specs[rtype]
        for index in range(replicas_of(spec)):
            out.append(
                Replica(
                    replica_type=rtype,
                    index=index,
                    pod_name=f"{job.name}-{rtype.lower()}-{index}",
                    restart_policy=spec.restart_policy or default_policy,
                    main_container=main_container,
                )
            )
    return out


def leader_rule(
    job: JobBase,
    leader_types: Sequence[str],
    waiting_types: Sequence[str],
    *,
    waiting_label: str,
) -> list[StartupRule]:
    """Waiting types start after the pod of the first present leader type (index 0)."""
    specs = job.replica_specs()
    leader = next((t for t in leader_types if t in specs and replicas_of(specs[t]) > 0), None)
    waiting = tuple(t for t in waiting_types if t in specs and replicas_of(specs[t]) > 0)
    if leader is None or not waiting:
        return []
    pod_name = f"{job.name}-{leader.lower()}-0"
    return [
        StartupRule(
            waiting=waiting,
            needed_pods=(pod_name,),
            needed_services=(pod_name,),
            waiting_label=waiting_label,
            needed_label=f"the {leader.lower()} ({pod_name})",
        )
    ]


def build(
    job: JobBase,
    observed: Observed,
    replicas: Sequence[Replica],
    rules: Sequence[StartupRule],
    *,
    role_of: Callable[[Replica], str | None],
    env_for: EnvFor,
    startup_timeout: int = 600,
) -> list[dict[str, Any]]:
    """A pod and a headless Service per replica; pods of gated replica types are left out
    (their Services are created at once)."""
    gate = startup.evaluate(rules, observed, started_at=None, timeout_seconds=startup_timeout)
    specs = job.replica_specs()
    out: list[dict[str, Any]] = []
    for replica in replicas:
        spec: ReplicaSpec = specs[replica.replica_type]
        labels = children.replica_labels(job, replica.replica_type, replica.index, role_of(replica))
        template = children.pod_template(
            spec,
            labels=labels,
            restart_policy=children.pod_restart_policy(replica.restart_policy),
            env_for=lambda i, c, r=replica: env_for(r, i, c),  # type: ignore[misc]
        )
        # Services are not gated: their names resolve as soon as the pods are Ready.
        if replica.replica_type not in gate.blocked:
            out.append(children.with_hash(children.pod(job, replica.pod_name, template)))
        selector = {
            k: labels[k] for k in (L.OPERATOR_NAME, L.JOB_NAME, L.REPLICA_TYPE, L.REPLICA_INDEX)
        }
        service = children.headless_service(
            job,
            replica.pod_name,
            labels=labels,
            selector=selector,
            ports=children.service_ports(template["spec"], replica.main_container),
        )
        out.append(children.with_hash(service))
    return out


def replica_statuses(
    job: JobBase, replicas: Sequence[Replica], observed: Observed
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
            k: v for k, v in children.replica_labels(job, rtype, 0).items() if k != L.REPLICA_INDEX
        }
        selector: LabelSelector = {"matchLabels": match}
        out[rtype] = ReplicaStatus(
            active=active,
            succeeded=succeeded,
            failed=failed,
            label_selector=selector,
            selector=L.job_selector(job.kind, job.name, rtype),
        )
    return out


def status(job: JobBase, replicas: Sequence[Replica], observed: Observed) -> JobStatus:
    """A JobStatus holding only the replica counts."""
    return JobStatus(replica_statuses=replica_statuses(job, replicas, observed))


def is_running(replicas: Sequence[Replica], observed: Observed) -> bool:
    """Every replica has its pod, none is pending or failed, and at least one runs."""
    pods = [observed.pods.get(r.pod_name) for r in replicas]
    if not pods or any(p is None for p in pods):
        return False
    present = [p for p in pods if p is not None]
    if not all(podstate.is_running(p) or podstate.is_succeeded(p) for p in present):
        return False
    return any(podstate.is_running(p) for p in present)
