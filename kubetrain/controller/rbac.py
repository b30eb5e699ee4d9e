"""The RBAC rules the operator needs, derived from its configuration.

The operator is the one place that knows which API calls it makes, so it states its own
rules; the ``TrainingOperator`` construct renders them into a ClusterRole (cluster-wide)
or one Role per watched namespace. Least privilege: explicit verbs and resources, no
wildcards, no ``pods/exec`` (MPI launchers reach workers over SSH).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain.api.kinds import (
    CLUSTER_TRAINING_RUNTIME,
    MPI,
    TRAINING_RUNTIME,
    TRAINJOB,
    kind_info,
)
from kubetrain.controller.config import GangScheduler, OperatorConfig
from kubetrain.controller.gang import BACKENDS
from kubetrain.frameworks.elastic import AUTOSCALED_KINDS

# Children are created with POST, changed only by server-side apply or a JSON patch (both
# PATCH), deleted with a uid precondition; nothing is ever PUT, so no child gets
# ``update``. ``get`` answers a
# 409 on create: is the object holding the name this job's?
_WATCHED = ("get", "list", "watch")


@dataclass(frozen=True)
class PolicyRule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, list[str]]:
        wire = {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            wire["resourceNames"] = list(self.resource_names)
        return wire


def operator_rules(config: OperatorConfig) -> list[PolicyRule]:
    """Rules for the job namespaces (a ClusterRole, or a Role in each watched namespace)."""
    infos = [kind_info(k) for k in config.kinds]
    trainjobs = TRAINJOB.kind in config.kinds
    mpi = MPI.kind in config.kinds
    pod_verbs: tuple[str, ...] = ("create", "delete", *_WATCHED)
    if mpi:
        # An MPI launcher's pod (made by the Job controller) is created gated under
        # launcherCreationPolicy AtStartup; the gate is lifted with a JSON patch.
        pod_verbs += ("patch",)
    rules: list[PolicyRule] = []
    for group in sorted({i.group for i in infos}):
        kinds = tuple(i.plural for i in infos if i.group == group)
        # A TrainJob's runtimePatches times are stamped as Trainer's webhook stamps them
        # (a JSON patch conditional on the resourceVersion, api/trainer/patch_times.py).
        stamped = ("patch",) if group == TRAINJOB.group else ()
        rules += [
            # Jobs: watched; deleted when their TTL passes.
            PolicyRule((group,), kinds, (*_WATCHED, "delete", *stamped)),
            # Status: written by server-side apply only.
            PolicyRule((group,), tuple(f"{k}/status" for k in kinds), ("patch",)),
            # Children carry blockOwnerDeletion, which needs update on the owner's
            # finalizers.
            PolicyRule((group,), tuple(f"{k}/finalizers" for k in kinds), ("update",)),
        ]
    if trainjobs:
        # A TrainJob's runtime: read, and marked (the in-use annotation, a JSON patch) while
        # a TrainJob names it. ClusterTrainingRuntimes are in cluster_rules().
        rules.append(
            PolicyRule((TRAINING_RUNTIME.group,), (TRAINING_RUNTIME.plural,), (*_WATCHED, "patch"))
        )
    rules += [
        # Pods are immutable once created; Services are applied again when they change.
        PolicyRule(("",), ("pods",), pod_verbs),
        PolicyRule(("",), ("services",), ("create", "delete", *_WATCHED, "patch")),
        PolicyRule(("",), ("events",), ("create",)),
    ]
    if mpi or trainjobs or serves_progress(config):
        # The hostfile and the progress server's CA bundle change; each ConfigMap goes
        # with its job (GC).
        rules.append(PolicyRule(("",), ("configmaps",), ("create", *_WATCHED, "patch")))
    if mpi or trainjobs:
        # The SSH key pair: its random name recorded in the job's status first, then
        # created; never read, listed, changed or deleted (GC removes it with the job).
        rules.append(PolicyRule(("",), ("secrets",), ("create",)))
    if mpi:
        rules.append(PolicyRule(("batch",), ("jobs",), ("create", "delete", *_WATCHED)))
    if config.gang_scheduler is not GangScheduler.NONE:
        # The gang scheduler's PodGroups only (one per job, applied when the gang changes).
        group = BACKENDS[config.gang_scheduler].group
        rules.append(PolicyRule((group,), ("podgroups",), ("create", "delete", *_WATCHED, "patch")))
    if any(kind in config.kinds for kind in AUTOSCALED_KINDS):
        # An elastic job's HPA (plugins/autoscaler): applied when its bounds or metrics
        # change, deleted when the job stops asking for one, is suspended or ends.
        rules.append(
            PolicyRule(
                ("autoscaling",),
                ("horizontalpodautoscalers",),
                ("create", "delete", *_WATCHED, "patch"),
            )
        )
    return rules


def serves_progress(config: OperatorConfig) -> bool:
    """Whether the operator runs the progress server."""
    return config.progress_server


def cluster_rules(config: OperatorConfig) -> list[PolicyRule]:
    """Rules on cluster-scoped resources, granted by a ClusterRole even to an operator
    that watches only some namespaces: the ClusterTrainingRuntimes TrainJobs reference,
    and TokenReviews, which prove a progress report comes from a TrainJob's pod; and Nodes,
    read only, to move jobs off lost and unhealthy ones (``node_health``)."""
    rules = [PolicyRule(("",), ("nodes",), _WATCHED)]
    if TRAINJOB.kind in config.kinds:
        runtime = CLUSTER_TRAINING_RUNTIME
        rules.append(PolicyRule((runtime.group,), (runtime.plural,), (*_WATCHED, "patch")))
    if serves_progress(config):
        rules.append(PolicyRule(("authentication.k8s.io",), ("tokenreviews",), ("create",)))
    return rules


def progress_rules(config: OperatorConfig) -> list[PolicyRule]:
    """Rules in the operator's own namespace for the progress server's certificate
    Secret: created once (a create cannot be limited to a name), then read and renewed
    by name only. Nothing when the progress server is off."""
    if not serves_progress(config):
        return []
    return [
        PolicyRule(("",), ("secrets",), ("create",)),
        PolicyRule(("",), ("secrets",), ("get", "update"), (config.progress_secret,)),
    ]


def leader_election_rules() -> list[PolicyRule]:
    """Rules in the operator's own namespace for its Lease (read, created once, renewed
    and released with a resourceVersion-checked PUT)."""
    return [PolicyRule(("coordination.k8s.io",), ("leases",), ("create", "get", "update"))]
