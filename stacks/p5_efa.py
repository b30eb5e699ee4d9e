"""``p5-efa``: AWS p5.48xlarge (8x H100) with 32 EFA interfaces."""

from kubetrain.constructs.job_common import Placement
from kubetrain.constructs.monitoring import MonitoringProps
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.node_pool import GpuNodePoolProps
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.samples import HorovodSampleProps, LinearScaling, PyTorchDdpSampleProps
from kubetrain.constructs.types import Quantity, Resources
from kubetrain.gitops.stack import Samples, Stack
from stacks._common import NCCL_TESTS_IMAGE, OPERATOR_IMAGE
from stacks._queues import team_queues
from stacks._runtimes import gpu_torch_runtime

# Pods that get hugepages (the EFA profile) must also request memory or CPU.
_NODE = Resources(cpu=Quantity.of(96), memory=Quantity.gibibytes(1024))
_SCALING = LinearScaling(batch_size=64, steps=2000)

STACK = Stack(
    name="p5-efa",
    version="0.1.0",
    description="EKS p5.48xlarge node group with EFA (aws-ofi-nccl)",
    operator=TrainingOperatorProps(image=OPERATOR_IMAGE),
    node_pools=(
        GpuNodePoolProps(
            name="p5",
            profile=NcclProfile.efa(instance_type="p5.48xlarge"),
            tuner_image=OPERATOR_IMAGE,
            gpu_product="NVIDIA-H100-80GB-HBM3",
            node_labels={"node.kubernetes.io/instance-type": "p5.48xlarge"},
            topology_key="topology.k8s.aws/network-node-layer-3",
            preflight_nodes=2,
            preflight_image=NCCL_TESTS_IMAGE,
        ),
    ),
    runtimes=(
        gpu_torch_runtime(
            "torch-p5-efa",
            "p5",
            placement=Placement.PREFER_SAME_BLOCK,
            queue="default",
            resources=_NODE,
        ),
    ),
    queues=team_queues("p5", nodes_per_team=2, cpu_per_node=192, memory_per_node="2048Gi"),
    monitoring=MonitoringProps(),
    samples=Samples(
        node_pool="p5",
        pytorch=PyTorchDdpSampleProps(nodes=2, gpus_per_node=8, scaling=_SCALING, resources=_NODE),
        horovod=HorovodSampleProps(workers=2, gpus_per_node=8, scaling=_SCALING, resources=_NODE),
    ),
)
