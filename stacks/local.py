"""``local``: no GPUs; fits the local control plane (kwok) and kind. The default stack."""

from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.samples import (
    HorovodSampleProps,
    LinearScaling,
    PyTorchDdpSampleProps,
    TensorFlowMwmsSampleProps,
)
from kubetrain.constructs.types import Quantity, Resources
from kubetrain.gitops.stack import Samples, Stack
from stacks._common import OPERATOR_IMAGE
from stacks._runtimes import local_runtimes

_SMALL = Resources(cpu=Quantity.millicores(500), memory=Quantity.gibibytes(1))
_SCALING = LinearScaling(base_lr=0.05, batch_size=32, steps=200)

STACK = Stack(
    name="local",
    version="0.1.0",
    description="CPU-only: the operator and one small sample job per framework",
    operator=TrainingOperatorProps(image=OPERATOR_IMAGE),
    runtimes=local_runtimes(),
    samples=Samples(
        pytorch=PyTorchDdpSampleProps(nodes=2, scaling=_SCALING, resources=_SMALL),
        horovod=HorovodSampleProps(workers=2, scaling=_SCALING, resources=_SMALL),
        tensorflow=TensorFlowMwmsSampleProps(workers=2, scaling=_SCALING, resources=_SMALL),
    ),
)
