"""The JAXJob plugin: the replicated plugin with the JAX framework's rules."""

from __future__ import annotations

from kubetrain.api.jax import JAXJob
from kubetrain.controller.plugins.replicated import ReplicatedPlugin
from kubetrain.frameworks import ClusterAddressing, jax


class JaxPlugin(ReplicatedPlugin[JAXJob]):
    """Reconciles ``kubeflow.org/v1`` JAXJobs."""

    def __init__(self, addressing: ClusterAddressing | None = None) -> None:
        super().__init__(jax.FRAMEWORK, JAXJob, addressing)
