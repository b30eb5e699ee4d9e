"""``h100-infiniband``: CoreWeave-style HGX H100 nodes on an InfiniBand fabric."""

from kubetrain.constructs.job_common import Placement
from kubetrain.constructs.monitoring import MonitoringProps
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.node_pool import GpuNodePoolProps
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.samples import LinearScaling, PyTorchDdpSampleProps
from kubetrain.gitops.stack import Samples, Stack
from stacks._common import NCCL_TESTS_IMAGE, OPERATOR_IMAGE
from stacks._queues import team_queues
from stacks._runtimes import gpu_torch_runtime

STACK = Stack(
    name="h100-infiniband",
    version="0.1.0",
    description="HGX H100 (8 GPUs/node) with 8x400G InfiniBand, SHARP-capable",
    operator=TrainingOperatorProps(image=OPERATOR_IMAGE, replicas=2),
    node_pools=(
        GpuNodePoolProps(
            name="h100-ib",
            profile=NcclProfile.infiniband(hcas=("ibp",), rdma_resource=("rdma/ib", 1)),
            tuner_image=OPERATOR_IMAGE,
            gpu_product="NVIDIA-H100-80GB-HBM3",
            topology_key="ib.coreweave.cloud/leafgroup",
            preflight_nodes=2,
            preflight_image=NCCL_TESTS_IMAGE,
        ),
    ),
    runtimes=(
        gpu_torch_runtime(
            "torch-h100-ib",
            "h100-ib",
            placement=Placement.SAME_BLOCK,
            queue="default",
        ),
    ),
    queues=team_queues("h100-ib", nodes_per_team=2, cpu_per_node=128, memory_per_node="2048Gi"),
    monitoring=MonitoringProps(),
    samples=Samples(
        node_pool="h100-ib",
        pytorch=PyTorchDdpSampleProps(
            nodes=4,
            gpus_per_node=8,
            placement=Placement.SAME_BLOCK,
            scaling=LinearScaling(base_lr=0.05, batch_size=64, steps=2000),
        ),
    ),
)
