"""Runtimes the example stacks ship (the ``runtimes`` chart).

The ``local`` stack's CPU runtimes are named like upstream Trainer's (``torch-distributed``,
``deepspeed-distributed``, ``jax-distributed``, ``xgboost-distributed``), so upstream's SDK
examples run unchanged, plus ``tensorflow-distributed`` and ``horovod-distributed``, which
upstream lacks, and ``torch-ddp-sample``: the PyTorch sample trainer under the linear
scaling rule. The GPU stacks add a torch runtime bound to their fabric-tuned pool.
"""

from __future__ import annotations

from kubetrain.constructs import (
    JaxRuntime,
    MpiRuntime,
    MpiRuntimeProps,
    Placement,
    RuntimeFramework,
    RuntimeProps,
    TensorFlowRuntime,
    TorchRuntime,
    XGBoostRuntime,
)
from kubetrain.constructs.samples import LinearScaling
from kubetrain.constructs.samples.common import sample_image
from kubetrain.constructs.types import Image, Quantity, Resources
from kubetrain.gitops.stack import StackRuntime

#: A CPU node's share: a whole CPU (so the SDK reads the device as cpu x 1), 2 GiB.
CPU_NODE = Resources(cpu=Quantity.of(1), cpu_limit=Quantity.of(1), memory=Quantity.gibibytes(2))
#: Upstream Trainer v2.3.0's runtime images, for the frameworks kubetrain builds none for.
DEEPSPEED_IMAGE = Image("ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0")
JAX_IMAGE = Image("nvcr.io/nvidia/jax:25.10-py3")
XGBOOST_IMAGE = Image("ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0")
#: The sample trainer's linear scaling: 0.05 for one process of 32 samples, scaled by the
#: world size (nodes x processes per node) each run reads from torchrun.
SAMPLE_SCALING = LinearScaling(base_lr=0.05, batch_size=32, steps=200)


def local_runtimes() -> tuple[StackRuntime, ...]:
    """The CPU runtimes of the ``local`` stack."""
    torch = sample_image("pytorch")
    return (
        StackRuntime(
            TorchRuntime, RuntimeProps(name="torch-distributed", image=torch, resources=CPU_NODE)
        ),
        StackRuntime(
            TorchRuntime,
            RuntimeProps(
                name="torch-ddp-sample",
                image=torch,
                num_nodes=2,
                command=("torchrun", "-m", "images.pytorch.train", *SAMPLE_SCALING.args()),
                resources=CPU_NODE,
            ),
        ),
        StackRuntime(
            MpiRuntime,
            MpiRuntimeProps(
                name="deepspeed-distributed",
                flavor=RuntimeFramework.DEEPSPEED,
                image=DEEPSPEED_IMAGE,
                run_launcher_as_node=True,
                ssh_auth_mount_path="/home/mpiuser/.ssh",
                node_command=("/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"),
                ssh_port=2222,
                run_as_user=1000,
                resources=CPU_NODE,
            ),
        ),
        StackRuntime(
            MpiRuntime,
            MpiRuntimeProps(
                name="horovod-distributed",
                flavor=RuntimeFramework.HOROVOD,
                image=sample_image("horovod"),
                num_nodes=2,
                # The launcher runs ranks too: the Kubeflow SDK counts it as node-0, and
                # reports Running only when its steps match numNodes.
                run_launcher_as_node=True,
                resources=CPU_NODE,
            ),
        ),
        StackRuntime(
            JaxRuntime, RuntimeProps(name="jax-distributed", image=JAX_IMAGE, resources=CPU_NODE)
        ),
        StackRuntime(
            XGBoostRuntime,
            RuntimeProps(name="xgboost-distributed", image=XGBOOST_IMAGE, resources=CPU_NODE),
        ),
        StackRuntime(
            TensorFlowRuntime,
            RuntimeProps(
                name="tensorflow-distributed",
                image=sample_image("tensorflow"),
                resources=CPU_NODE,
            ),
        ),
    )


def gpu_torch_runtime(
    name: str,
    pool: str,
    *,
    placement: Placement,
    resources: Resources | None = None,
    queue: str | None = None,
) -> StackRuntime:
    """A torch runtime on a stack's GPU pool: the pool's node selector, tolerations,
    priority, NCCL profile (env, /dev/shm, IPC_LOCK, RDMA resources) and all its GPUs;
    with ``queue``, its TrainJobs must be queued in that LocalQueue of their namespace."""
    return StackRuntime(
        TorchRuntime,
        RuntimeProps(
            name=name,
            image=sample_image("pytorch"),
            num_nodes=2,
            placement=placement,
            resources=resources or Resources(),
            queue=queue,
        ),
        node_pool=pool,
    )
