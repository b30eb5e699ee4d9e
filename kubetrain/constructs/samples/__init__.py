"""Sample training jobs, one construct per framework, used by the stacks."""

from kubetrain.constructs.samples.horovod import HorovodSample, HorovodSampleProps
from kubetrain.constructs.samples.pytorch_ddp import PyTorchDdpSample, PyTorchDdpSampleProps
from kubetrain.constructs.samples.scaling import LinearScaling
from kubetrain.constructs.samples.tensorflow_mwms import (
    TensorFlowMwmsSample,
    TensorFlowMwmsSampleProps,
)

__all__ = [
    "HorovodSample",
    "HorovodSampleProps",
    "LinearScaling",
    "PyTorchDdpSample",
    "PyTorchDdpSampleProps",
    "TensorFlowMwmsSample",
    "TensorFlowMwmsSampleProps",
]
