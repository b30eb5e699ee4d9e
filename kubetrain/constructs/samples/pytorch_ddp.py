"""``PyTorchDdpSample``: the PyTorch DDP sample trainer as a PyTorchJob."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import constructs

from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.samples.common import SampleProps, sample_image
from kubetrain.constructs.samples.scaling import LR_ANNOTATION


@dataclass(frozen=True, kw_only=True)
class PyTorchDdpSampleProps(SampleProps):
    """Props of :class:`PyTorchDdpSample`."""

    nodes: int = 2
    """Pods: one Master plus ``nodes - 1`` Workers."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nodes < 1:
            raise ValueError(f"nodes ({self.nodes}) must be >= 1")


class PyTorchDdpSample(constructs.Construct):
    """A PyTorchJob running ``images/pytorch/train.py``: torchrun with one process per
    GPU (plain python on CPU), learning rate scaled by the world size."""

    def __init__(self, scope: constructs.Construct, id: str, props: PyTorchDdpSampleProps) -> None:
        super().__init__(scope, id)
        launcher = ("torchrun", "-m") if props.gpus_per_node > 1 else ("python", "-m")
        job_props = PyTorchJobProps(
            image=props.image or sample_image("pytorch"),
            command=(*launcher, "images.pytorch.train"),
            args=props.scaling.args(),
            name=props.name or id.lower(),
            namespace=props.namespace,
            workers=props.nodes - 1,
            gpus_per_node=props.gpus_per_node,
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
