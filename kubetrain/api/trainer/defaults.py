"""The explicit defaulting step of the Trainer v2 kinds: what upstream v2.3.0's CRDs write
into a stored object, applied to a copy.

kubetrain's CRDs carry no defaults (so that apply then diff stays empty under GitOps), and
parsing never invents values; the operator, and anything else that needs a complete
object, calls :func:`apply_trainer_defaults`. Defaults:

- TrainJob: ``suspend: false``, ``managedBy: trainer.kubeflow.org/trainjob-controller``,
  ``runtimeRef.apiGroup: trainer.kubeflow.org``, ``runtimeRef.kind:
  ClusterTrainingRuntime``;
- runtimes: ``mlPolicy.numNodes: 1`` (upstream documents it and applies it in code);
  ``mpi``: ``numProcPerNode: 1``, ``mpiImplementation: OpenMPI`` (also for ``""``),
  ``sshAuthMountPath: /root/.ssh``, ``runLauncherAsNode: false``; ``flux.numProcPerNode:
  1``; ``coscheduling.scheduleTimeoutSeconds: 60``; volcano ``networkTopology``: ``mode:
  hard``, ``highestTierAllowed: 1``; each replicated job ``replicas: 1`` and ``groupName:
  default``; a ``failurePolicy``'s ``restartStrategy: Recreate``; a claim policy's
  ``retentionPolicy.whenDeleted: Delete``.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from kubetrain.api.trainer.constants import (
    DEFAULT_RUNTIME_API_GROUP,
    DEFAULT_RUNTIME_KIND,
    MANAGED_BY_VALUES,
)
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob

T = TypeVar("T", bound=TrainJob | RuntimeBase)

DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60


def _fill(target: dict[str, Any], defaults: dict[str, Any]) -> None:
    for key, value in defaults.items():
        target.setdefault(key, value)


def _trainjob(wire: dict[str, Any]) -> None:
    spec = wire["spec"]
    _fill(spec, {"suspend": False, "managedBy": MANAGED_BY_VALUES[0]})
    _fill(spec["runtimeRef"], {"apiGroup": DEFAULT_RUNTIME_API_GROUP, "kind": DEFAULT_RUNTIME_KIND})


def _runtime(wire: dict[str, Any]) -> None:
    spec = wire["spec"]
    policy = spec.get("mlPolicy")
    if policy is not None:
        policy.setdefault("numNodes", 1)
        mpi = policy.get("mpi")
        if mpi is not None:
            _fill(
                mpi,
                {
                    "numProcPerNode": 1,
                    "sshAuthMountPath": DEFAULT_SSH_AUTH_MOUNT_PATH,
                    "runLauncherAsNode": False,
                },
            )
            if not mpi.get("mpiImplementation"):
                mpi["mpiImplementation"] = "OpenMPI"
        if policy.get("flux") is not None:
            policy["flux"].setdefault("numProcPerNode", 1)
    groups = spec.get("podGroupPolicy") or {}
    if groups.get("coscheduling") is not None:
        coscheduling = groups["coscheduling"]
        # Upstream: 0 (or nothing) means the default.
        if not coscheduling.get("scheduleTimeoutSeconds"):
            coscheduling["scheduleTimeoutSeconds"] = DEFAULT_SCHEDULE_TIMEOUT_SECONDS
    topology = (groups.get("volcano") or {}).get("networkTopology")
    if topology is not None:
        _fill(topology, {"mode": "hard", "highestTierAllowed": 1})
    jobset = spec["template"]["spec"]
    for rjob in jobset["replicatedJobs"]:
        _fill(rjob, {"replicas": 1, "groupName": "default"})
    if jobset.get("failurePolicy") is not None:
        jobset["failurePolicy"].setdefault("restartStrategy", "Recreate")
    for claims in jobset.get("volumeClaimPolicies") or []:
        if claims.get("retentionPolicy") is not None:
            claims["retentionPolicy"].setdefault("whenDeleted", "Delete")


def apply_trainer_defaults(obj: T) -> T:
    """A copy of a TrainJob or runtime with upstream v2.3.0's defaults filled in."""
    wire = obj.to_wire()
    if isinstance(obj, TrainJob):
        _trainjob(wire)
    else:
        _runtime(wire)
    # The same class as ``obj`` (mypy reads the classmethod on the bound's union).
    return cast(T, type(obj).model_validate(wire, by_alias=True, by_name=False))
