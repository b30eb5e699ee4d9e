"""``a3-mega-tcpxo``: GKE A3 Mega (8x H100 Mega) with GPUDirect-TCPXO."""

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
    name="a3-mega-tcpxo",
    version="0.1.0",
    description="GKE a3-megagpu-8g node pool with GPUDirect-TCPXO and compact placement",
    operator=TrainingOperatorProps(image=OPERATOR_IMAGE),
    node_pools=(
        GpuNodePoolProps(
            name="a3-mega",
            profile=NcclProfile.gcp_tcpxo(),
            tuner_image=OPERATOR_IMAGE,
            gpu_product="NVIDIA-H100-80GB-HBM3",
            topology_key="cloud.google.com/gce-topology-block",
            preflight_nodes=2,
            preflight_image=NCCL_TESTS_IMAGE,
        ),
    ),
    runtimes=(
        gpu_torch_runtime(
            "torch-a3-mega",
            "a3-mega",
            placement=Placement.PREFER_SAME_BLOCK,
            queue="default",
        ),
    ),
    queues=team_queues("a3-mega", nodes_per_team=2, cpu_per_node=208, memory_per_node="1872Gi"),
    monitoring=MonitoringProps(),
    samples=Samples(
        node_pool="a3-mega",
        pytorch=PyTorchDdpSampleProps(
            nodes=2,
            gpus_per_node=8,
            placement=Placement.PREFER_SAME_BLOCK,
            scaling=LinearScaling(batch_size=64, steps=2000),
        ),
    ),
)
