"""An operator, an InfiniBand H100 pool and a 4-node PyTorch DDP job (the README example)."""

from kubetrain.constructs import App, Chart, GpuNodePool, GpuNodePoolProps, Image, NcclProfile
from kubetrain.constructs import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps

app = App()
chart = Chart(app, "training", disable_resource_name_hashes=True)
operator_image = Image("ghcr.io/kubetrain/operator:0.1.0")
TrainingOperator(chart, "Operator", TrainingOperatorProps(image=operator_image))
pool = GpuNodePool(chart, "h100", GpuNodePoolProps(
    name="h100", profile=NcclProfile.infiniband(hcas=("ibp",)), tuner_image=operator_image,
    gpu_product="NVIDIA-H100-80GB-HBM3", preflight_nodes=0))
PyTorchJob(chart, "Llm", PyTorchJobProps(
    image=Image("ghcr.io/kubetrain/pytorch-trainer:0.1.0"), node_pool=pool, workers=3,
    command=("torchrun", "-m", "images.pytorch.train")))
app.synth()  # writes dist/training.k8s.yaml
