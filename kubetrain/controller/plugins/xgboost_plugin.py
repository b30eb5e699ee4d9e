"""The XGBoostJob plugin: the replicated plugin with the XGBoost framework's rules."""

from __future__ import annotations

from kubetrain.api.xgboost import XGBoostJob
from kubetrain.controller.plugins.replicated import ReplicatedPlugin
from kubetrain.frameworks import ClusterAddressing, xgboost


class XGBoostPlugin(ReplicatedPlugin[XGBoostJob]):
    """Reconciles ``kubeflow.org/v1`` XGBoostJobs."""

    def __init__(self, addressing: ClusterAddressing | None = None) -> None:
        super().__init__(xgboost.FRAMEWORK, XGBoostJob, addressing)
