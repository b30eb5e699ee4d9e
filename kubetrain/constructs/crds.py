"""``KubeflowCrds``: the CRDs generated from ``kubetrain.api``: Kubeflow v1's job kinds (the
kinds table's) and Trainer v2's TrainJob, TrainingRuntime and ClusterTrainingRuntime."""

from __future__ import annotations

from dataclasses import dataclass, field

import constructs

from kubetrain.api.crds import CRD_INFOS, crd_for
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, TRAINJOB
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.constructs.objects import HeldApiObject

_KINDS = tuple(info.kind.kind for info in CRD_INFOS)


@dataclass(frozen=True, kw_only=True)
class KubeflowCrdsProps:
    """Props of :class:`KubeflowCrds`."""

    kinds: tuple[str, ...] = _KINDS
    """Kinds whose CRD is emitted. Default: every v1 job kind, TrainJob,
    TrainingRuntime and ClusterTrainingRuntime (a TrainJob needs both runtime kinds)."""
    annotations: dict[str, str] = field(default_factory=dict)
    """Annotations on every CRD (e.g. Argo CD sync options). Default: none."""
    replica_limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
    """The most replicas per replica type and pods per job the CRDs admit (CEL rules; give
    ``kubetrain validate`` the same with ``--max-replicas-per-type``/``--max-pods-per-job``).
    Default: 1,000 per replica type and 2,000 per job, e.g.
    ``ReplicaLimits(max_replicas_per_type=2048, max_pods_per_job=2049)`` for larger jobs."""

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in _KINDS]
        if unknown:
            raise ValueError(
                f"kinds ({', '.join(unknown)}) not supported: use any of {', '.join(_KINDS)}"
            )
        if not self.kinds:
            raise ValueError("kinds (empty) must name at least one job kind")
        runtimes = (TRAINING_RUNTIME.kind, CLUSTER_TRAINING_RUNTIME.kind)
        if TRAINJOB.kind in self.kinds and not all(r in self.kinds for r in runtimes):
            raise ValueError(
                f"kinds ({', '.join(self.kinds)}) has TrainJob without its runtimes: add "
                f"{' and '.join(r for r in runtimes if r not in self.kinds)}"
            )


class KubeflowCrds(constructs.Construct):
    """The CRDs of the enabled job kinds.

    Child ids are the kinds (``PyTorchJob``, ``TrainJob``, ...); object names are the CRD
    names (``pytorchjobs.kubeflow.org``, ``trainjobs.trainer.kubeflow.org``).
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        props: KubeflowCrdsProps | None = None,
    ) -> None:
        super().__init__(scope, id)
        props = props or KubeflowCrdsProps()
        for kind in props.kinds:
            obj = crd_for(kind, props.replica_limits)
            if props.annotations:
                obj["metadata"]["annotations"] = dict(props.annotations)
            HeldApiObject(self, kind, obj)
