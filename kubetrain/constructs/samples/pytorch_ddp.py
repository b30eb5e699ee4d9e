"""``PyTorchDdpSample``: the PyTorch DDP sample trainer as a PyTorchJob."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import constructs

from kubetrain import __version__
from kubetrain.constructs.job_common import NcclProfileLike, NodePoolLike, Placement
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.samples.scaling import LR_ANNOTATION, LinearScaling
from kubetrain.constructs.types import Image, Resources


def default_image() -> Image:
    return Image(f"ghcr.io/kubetrain/pytorch-trainer:{__version__}")


@dataclass(frozen=True, kw_only=True)
class PyTorchDdpSampleProps:
    """Props of :class:`PyTorchDdpSample`."""

    nodes: int = 2
    """Pods: one Master plus ``nodes - 1`` Workers."""
    gpus_per_node: int = 0
    """GPUs (and processes, via torchrun) per pod. 0: one CPU process per pod (gloo)."""
    image: Image = field(default_factory=default_image)
    """Trainer image. Default: kubetrain's PyTorch trainer of this version."""
    scaling: LinearScaling = field(default_factory=LinearScaling)
    """Learning rate, batch and steps; the rate is scaled by the world size."""
    name: str | None = None
    """Job name. Default: the construct id, lowercased."""
    namespace: str = "default"
    """Namespace of the job."""
    profile: NcclProfileLike | None = None
    """NCCL profile. Default: none, or the node pool's."""
    node_pool: NodePoolLike | None = None
    """GPU node pool to run on. Default: none."""
    placement: Placement = Placement.ANY
    """Same-block placement of the pods."""
    resources: Resources = field(default_factory=Resources)
    """CPU/memory per pod."""

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes ({self.nodes}) must be >= 1")


class PyTorchDdpSample(constructs.Construct):
    """A PyTorchJob running ``images/pytorch/train.py``: torchrun with one process per
    GPU (plain python on CPU), learning rate scaled by the world size."""

    def __init__(self, scope: constructs.Construct, id: str, props: PyTorchDdpSampleProps) -> None:
        super().__init__(scope, id)
        gpus = props.gpus_per_node
        launcher = ("torchrun", "-m") if gpus > 1 else ("python", "-m")
        job_props = PyTorchJobProps(
            image=props.image,
            command=(*launcher, "images.pytorch.train"),
            args=props.scaling.args(),
            name=props.name or id.lower(),
            namespace=props.namespace,
            workers=props.nodes - 1,
            gpus_per_node=gpus,
            profile=props.profile,
            node_pool=props.node_pool,
            placement=props.placement,
            resources=props.resources,
        )
        self.world_size = job_props.world_size
        job_props = dataclasses.replace(
            job_props, annotations={LR_ANNOTATION: props.scaling.describe(self.world_size)}
        )
        self.job = PyTorchJob(self, "Job", job_props)
