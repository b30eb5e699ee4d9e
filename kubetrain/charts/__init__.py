"""cdk8s charts: each one deployable unit, one folder of manifests."""

from kubetrain.charts.crds import CrdsChart
from kubetrain.charts.gpu_nodes import GpuNodesChart
from kubetrain.charts.operator import OperatorChart
from kubetrain.charts.samples import SamplesChart

__all__ = ["CrdsChart", "GpuNodesChart", "OperatorChart", "SamplesChart"]
