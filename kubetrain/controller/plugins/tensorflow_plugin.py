"""The TFJob plugin: the replicated plugin with the TensorFlow framework's rules."""

from __future__ import annotations

from kubetrain.api.tensorflow import TFJob
from kubetrain.controller.plugins.replicated import ReplicatedPlugin
from kubetrain.frameworks import ClusterAddressing, tensorflow


class TensorFlowPlugin(ReplicatedPlugin[TFJob]):
    """Reconciles ``kubeflow.org/v1`` TFJobs."""

    def __init__(self, addressing: ClusterAddressing | None = None) -> None:
        super().__init__(tensorflow.FRAMEWORK, TFJob, addressing)
