"""``TensorFlowMwmsSample``: the TensorFlow MultiWorkerMirroredStrategy sample as a TFJob."""

from __future__ import annotations

from dataclasses import dataclass, field

import constructs

from kubetrain import __version__
from kubetrain.constructs.job_common import NcclProfileLike, NodePoolLike, Placement
from kubetrain.constructs.samples.scaling import LR_ANNOTATION, LinearScaling
from kubetrain.constructs.tf_job import TFJob, TFJobProps
from kubetrain.constructs.types import Image, Resources


def default_image() -> Image:
    return Image(f"ghcr.io/kubetrain/tensorflow-trainer:{__version__}")


@dataclass(frozen=True, kw_only=True)
class TensorFlowMwmsSampleProps:
    """Props of :class:`TensorFlowMwmsSample`."""

    workers: int = 2
    """Worker pods (MultiWorkerMirroredStrategy: no parameter servers)."""
    gpus_per_node: int = 0
    """GPUs per worker; each is one replica in sync. 0: one CPU replica per worker."""
    image: Image = field(default_factory=default_image)
    """Trainer image. Default: kubetrain's TensorFlow trainer of this version."""
    scaling: LinearScaling = field(default_factory=LinearScaling)
    """Learning rate, batch and steps; the rate is scaled by the replicas in sync."""
    name: str | None = None
    """Job name. Default: the construct id, lowercased."""
    namespace: str = "default"
    """Namespace of the job."""
    profile: NcclProfileLike | None = None
    """NCCL profile (MWMS uses NCCL all-reduce on GPUs). Default: none."""
    node_pool: NodePoolLike | None = None
    """GPU node pool to run on. Default: none."""
    placement: Placement = Placement.ANY
    """Same-block placement of the workers."""
    resources: Resources = field(default_factory=Resources)
    """CPU/memory per worker."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers ({self.workers}) must be >= 1")


class TensorFlowMwmsSample(constructs.Construct):
    """A TFJob running ``images/tensorflow/train.py`` with MultiWorkerMirroredStrategy;
    success follows Worker 0 (the chief of an MWMS cluster without a Chief)."""

    def __init__(
        self, scope: constructs.Construct, id: str, props: TensorFlowMwmsSampleProps
    ) -> None:
        super().__init__(scope, id)
        self.world_size = props.workers * max(props.gpus_per_node, 1)
        self.job = TFJob(
            self,
            "Job",
            TFJobProps(
                image=props.image,
                command=("python", "-m", "images.tensorflow.train"),
                args=props.scaling.args(),
                name=props.name or id.lower(),
                namespace=props.namespace,
                workers=props.workers,
                gpus_per_node=props.gpus_per_node,
                profile=props.profile,
                node_pool=props.node_pool,
                placement=props.placement,
                resources=props.resources,
                annotations={LR_ANNOTATION: props.scaling.describe(self.world_size)},
            ),
        )
