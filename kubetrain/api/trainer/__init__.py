"""Kubeflow Trainer v2's API (``trainer.kubeflow.org/v1alpha1``): TrainJob,
TrainingRuntime and ClusterTrainingRuntime, schema-compatible with Trainer v2.3.0, with
their CRDs and loaders, built like the Kubeflow v1 kinds of ``kubetrain.api``."""

from kubetrain.api.trainer.defaults import apply_trainer_defaults
from kubetrain.api.trainer.invariants import check_trainer_update
from kubetrain.api.trainer.jobset import JobSetSpec, ReplicatedJob
from kubetrain.api.trainer.loader import (
    KubetrainObject,
    TrainerObject,
    load_object,
    load_object_file,
    load_objects_from_yaml,
    load_trainer_object,
)
from kubetrain.api.trainer.runtime import (
    ClusterTrainingRuntime,
    MLPolicy,
    PodGroupPolicy,
    TrainingRuntime,
    TrainingRuntimeSpec,
)
from kubetrain.api.trainer.trainjob import (
    RuntimePatch,
    RuntimeRef,
    Trainer,
    TrainJob,
    TrainJobSpec,
    TrainJobStatus,
)

__all__ = [
    "ClusterTrainingRuntime",
    "JobSetSpec",
    "KubetrainObject",
    "MLPolicy",
    "PodGroupPolicy",
    "ReplicatedJob",
    "RuntimePatch",
    "RuntimeRef",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerObject",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "apply_trainer_defaults",
    "check_trainer_update",
    "load_object",
    "load_object_file",
    "load_objects_from_yaml",
    "load_trainer_object",
]
