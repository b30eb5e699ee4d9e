"""What the CRDs of Kubeflow v1's job kinds (PyTorchJob, TFJob, MPIJob) are made of;
``kubetrain.api.crds`` generates them with Trainer v2's, through
``kubetrain.api.crd_generator``. A job kind's CRD has the status subresource (and the
scale subresource where the kind names a replica type for it), the invariants of
``kubetrain.api.invariants`` at the root or on each replica spec, the transition rule
keeping ``runPolicy.managedBy`` immutable, and the restart policy stored as a default
where every replica type of the kind shares one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.api.common import JobBase, JobStatus
from kubetrain.api.crd_generator import CrdInfo, node_at
from kubetrain.api.invariants import invariants_for, transitions_for
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import V1_KINDS
from kubetrain.api.rules import cel_transitions, placed_rules, replica_node

PRINTER_COLUMNS: list[dict[str, str | int]] = [
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    # kubetrain: the last progress report and the goodput (kubectl get -o wide).
    {
        "name": "Progress",
        "type": "integer",
        "jsonPath": ".status.trainerStatus.progressPercentage",
        "priority": 1,
    },
    {"name": "Step", "type": "integer", "jsonPath": ".status.progress.step", "priority": 1},
    {
        "name": "Last-Report",
        "type": "date",
        "jsonPath": ".status.progress.lastReportTime",
        "priority": 1,
    },
    {"name": "Goodput", "type": "string", "jsonPath": ".status.goodput.ratio", "priority": 1},
]


def uniform_restart_policy(kind: KindInfo) -> str | None:
    """The restart policy every replica type of ``kind`` defaults to, if they share one."""
    policies = {policy for _, policy in kind.default_restart_policies}
    return policies.pop() if len(policies) == 1 else None


def _store_restart_policy(kind: KindInfo) -> Callable[[dict[str, Any]], None]:
    def shape(root: dict[str, Any]) -> None:
        replica_spec = node_at(root, replica_node(kind))
        replica_spec.setdefault("x-kubernetes-validations", [])
        restart_policy = uniform_restart_policy(kind)
        if restart_policy is not None:
            # One schema holds every replica type: the default is stored only where the
            # kind gives them all the same one (an MPIJob's Launcher and Worker differ).
            properties = replica_spec["properties"]
            properties["restartPolicy"] = {**properties["restartPolicy"], "default": restart_policy}

    return shape


def _v1_info(model: type[JobBase], kind: KindInfo) -> CrdInfo:
    return CrdInfo(
        model,
        kind,
        tuple(PRINTER_COLUMNS),
        placed_rules(invariants_for, kind.kind),
        cel_transitions(transitions_for, kind.kind),
        status=JobStatus,
        scale_replica_type=kind.scale_replica_type,
        shape=_store_restart_policy(kind),
    )


#: The v1 job kinds' rows, in the kinds table's order.
JOB_CRD_INFOS: tuple[CrdInfo, ...] = tuple(_v1_info(k.model, k.info) for k in V1_KINDS)
