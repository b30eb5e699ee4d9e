"""The PaddleJob plugin: the replicated plugin with the PaddlePaddle framework's rules."""

from __future__ import annotations

from kubetrain.api.paddle import PaddleJob
from kubetrain.controller.plugins.replicated import ReplicatedPlugin
from kubetrain.frameworks import ClusterAddressing, paddle


class PaddlePlugin(ReplicatedPlugin[PaddleJob]):
    """Reconciles ``kubeflow.org/v1`` PaddleJobs."""

    def __init__(self, addressing: ClusterAddressing | None = None) -> None:
        super().__init__(paddle.FRAMEWORK, PaddleJob, addressing)
