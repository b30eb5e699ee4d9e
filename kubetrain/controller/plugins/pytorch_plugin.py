"""The PyTorchJob plugin: the replicated plugin with the PyTorch framework's rules."""

from __future__ import annotations

from kubetrain.api.pytorch import PyTorchJob
from kubetrain.controller.plugins.replicated import ReplicatedPlugin
from kubetrain.frameworks import ClusterAddressing, pytorch


class PyTorchPlugin(ReplicatedPlugin[PyTorchJob]):
    """Reconciles ``kubeflow.org/v1`` PyTorchJobs."""

    def __init__(self, addressing: ClusterAddressing | None = None) -> None:
        super().__init__(pytorch.FRAMEWORK, PyTorchJob, addressing)
