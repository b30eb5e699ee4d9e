"""The explicit defaulting step of the Trainer v2 kinds: what upstream v2.3.0's CRDs write
into a stored object, applied to a copy.

kubetrain's CRDs carry the same defaults as upstream's (``StoredDefault`` markers on the
models, written by ``kubetrain.api.stored_defaults``), so the API server stores them;
parsing never invents values, and the operator, and anything else that needs a complete
object, calls :func:`apply_trainer_defaults`, which writes the stored ones from the same
markers and adds what only code can decide. Stored:

- TrainJob: ``suspend: false``, ``managedBy: trainer.kubeflow.org/trainjob-controller``,
  ``runtimeRef.apiGroup: trainer.kubeflow.org``, ``runtimeRef.kind:
  ClusterTrainingRuntime``;
- runtimes: ``mpi``: ``numProcPerNode: 1``, ``mpiImplementation: OpenMPI``,
  ``sshAuthMountPath: /root/.ssh``, ``runLauncherAsNode: false``; ``flux.numProcPerNode:
  1``; ``coscheduling.scheduleTimeoutSeconds: 60``; volcano ``networkTopology``: ``mode:
  hard``, ``highestTierAllowed: 1``; each replicated job ``replicas: 1`` and ``groupName:
  default``; a ``failurePolicy``'s ``restartStrategy: Recreate``; a claim policy's
  ``retentionPolicy.whenDeleted: Delete``.

In code only (as upstream, whose CRDs do not store them either): ``mlPolicy.numNodes``,
the node count a TrainJob that sets none starts with, from the one rule that decides it
(:func:`kubetrain.api.trainer.elastic.runtime_nodes`): 1 as upstream, but an elastic
runtime's ``minNodes`` (a runtime's printer column shows only what was written); an empty
``mpiImplementation`` and a ``scheduleTimeoutSeconds`` of 0 mean the defaults (a schema
default only fills an absent field).
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from kubetrain.api.stored_defaults import fill_stored_defaults
from kubetrain.api.trainer.constants import DEFAULT_SCHEDULE_TIMEOUT_SECONDS
from kubetrain.api.trainer.elastic import runtime_nodes
from kubetrain.api.trainer.runtime import MPIImplementation, RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob

T = TypeVar("T", bound=TrainJob | RuntimeBase)


def _runtime(runtime: RuntimeBase, wire: dict[str, Any]) -> None:
    spec = wire["spec"]
    policy = spec.get("mlPolicy")
    if policy is not None:
        policy["numNodes"] = runtime_nodes(runtime.spec.ml_policy)
        mpi = policy.get("mpi")
        if mpi is not None and not mpi.get("mpiImplementation"):
            mpi["mpiImplementation"] = MPIImplementation.OPEN_MPI.value
    coscheduling = (spec.get("podGroupPolicy") or {}).get("coscheduling")
    # Upstream: 0 means the default too.
    if coscheduling is not None and not coscheduling.get("scheduleTimeoutSeconds"):
        coscheduling["scheduleTimeoutSeconds"] = DEFAULT_SCHEDULE_TIMEOUT_SECONDS


def apply_trainer_defaults(obj: T) -> T:
    """A copy of a TrainJob or runtime with upstream v2.3.0's defaults filled in."""
    wire = obj.to_wire()
    fill_stored_defaults(type(obj), wire)
    if not isinstance(obj, TrainJob):
        _runtime(obj, wire)
    # The same class as ``obj`` (mypy reads the classmethod on the bound's union).
    return cast(T, type(obj).model_validate(wire, by_alias=True, by_name=False))
