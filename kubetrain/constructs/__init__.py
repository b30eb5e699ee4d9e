"""cdk8s constructs: reusable building blocks of kubetrain stacks."""

from kubetrain._jsii import quiet_jsii

quiet_jsii()

# cdk8s' App and Chart, re-exported so that importing them from here keeps jsii quiet.
from cdk8s import App, Chart

from kubetrain.constructs.crds import KubeflowCrds, KubeflowCrdsProps
from kubetrain.constructs.gpu import GpuNodePool, GpuNodePoolProps, Taint
from kubetrain.constructs.nccl import NcclDebug, NcclProfile
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.types import Image, Quantity, Resources

__all__ = [
    "App",
    "Chart",
    "GpuNodePool",
    "GpuNodePoolProps",
    "Image",
    "KubeflowCrds",
    "KubeflowCrdsProps",
    "NcclDebug",
    "NcclProfile",
    "Quantity",
    "Resources",
    "Taint",
    "TrainingOperator",
    "TrainingOperatorProps",
]
