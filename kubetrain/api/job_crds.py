"""What the CRDs of Kubeflow v1's job kinds (PyTorchJob, TFJob, MPIJob, XGBoostJob) are made of;
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

from kubetrain.api.base import CelRule
from kubetrain.api.common import JobStatus
from kubetrain.api.crd_generator import VALUES, CrdInfo, PlacedRule, node_at
from kubetrain.api.invariants import invariants_for, transitions_for
from kubetrain.api.kinds import MPI, PYTORCH, TENSORFLOW, XGBOOST, KindInfo
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.mpi import MPIJob
from kubetrain.api.pytorch import PyTorchJob
from kubetrain.api.rules import REPLICA, REPLICA_FIELDS
from kubetrain.api.tensorflow import TFJob
from kubetrain.api.xgboost import XGBoostJob

PRINTER_COLUMNS = [
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def uniform_restart_policy(kind: KindInfo) -> str | None:
    """The restart policy every replica type of ``kind`` defaults to, if they share one."""
    policies = {policy for _, policy in kind.default_restart_policies}
    return policies.pop() if len(policies) == 1 else None


def _replica_node(kind: str) -> tuple[str, ...]:
    return ("spec", REPLICA_FIELDS[kind], VALUES)


def _rules(kind: str) -> Callable[[ReplicaLimits], list[PlacedRule]]:
    def rules(limits: ReplicaLimits) -> list[PlacedRule]:
        # Rules over one replica sit on each replica spec: their cost is estimated per
        # replica spec, and the API server's message then names the replica type.
        return [
            (_replica_node(kind) if i.scope == REPLICA else (), i.cel_rule())
            for i in invariants_for(kind, limits)
        ]

    return rules


def _transitions(kind: str) -> Callable[[], list[CelRule]]:
    return lambda: [t.cel_rule() for t in transitions_for(kind)]


def _store_restart_policy(kind: KindInfo) -> Callable[[dict[str, Any]], None]:
    def shape(root: dict[str, Any]) -> None:
        replica_spec = node_at(root, _replica_node(kind.kind))
        replica_spec.setdefault("x-kubernetes-validations", [])
        restart_policy = uniform_restart_policy(kind)
        if restart_policy is not None:
            # One schema holds every replica type: the default is stored only where the
            # kind gives them all the same one (an MPIJob's Launcher and Worker differ).
            properties = replica_spec["properties"]
            properties["restartPolicy"] = {**properties["restartPolicy"], "default": restart_policy}

    return shape


def _v1_info(model: type[PyTorchJob | TFJob | MPIJob | XGBoostJob], kind: KindInfo) -> CrdInfo:
    return CrdInfo(
        model,
        kind,
        tuple(PRINTER_COLUMNS),
        _rules(kind.kind),
        _transitions(kind.kind),
        status=JobStatus,
        scale_replica_type=kind.scale_replica_type,
        shape=_store_restart_policy(kind),
    )


#: The v1 job kinds' rows, in the order kubetrain lists them.
JOB_CRD_INFOS: tuple[CrdInfo, ...] = (
    _v1_info(PyTorchJob, PYTORCH),
    _v1_info(TFJob, TENSORFLOW),
    _v1_info(MPIJob, MPI),
    _v1_info(XGBoostJob, XGBOOST),
)
