"""``TensorFlowMwmsSample``: the TensorFlow MultiWorkerMirroredStrategy sample as a TFJob."""

from __future__ import annotations

from dataclasses import dataclass

import constructs

from kubetrain.constructs.samples.common import SampleProps, sample_image
from kubetrain.constructs.samples.scaling import LR_ANNOTATION
from kubetrain.constructs.tf_job import TFJob, TFJobProps


@dataclass(frozen=True, kw_only=True)
class TensorFlowMwmsSampleProps(SampleProps):
    """Props of :class:`TensorFlowMwmsSample` (each GPU is one replica in sync)."""

    workers: int = 2
    """Worker pods (MultiWorkerMirroredStrategy: no parameter servers)."""

    def __post_init__(self) -> None:
        super().__post_init__()
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
                image=props.image or sample_image("tensorflow"),
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
