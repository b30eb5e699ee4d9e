"""Typed models of Kubeflow's training jobs: the single source of truth for kubetrain."""

from kubetrain.api.common import (
    CleanPodPolicy,
    ConditionStatus,
    ConditionType,
    JobBase,
    JobCondition,
    JobStatus,
    ObjectMeta,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
)
from kubetrain.api.convert import Conversion, convert
from kubetrain.api.crds import all_crds, crd_for, crd_schema
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.jax import JAXJob, JAXJobSpec, JAXReplicaType
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.loader import Job, load_job, load_job_file, load_jobs_from_yaml
from kubetrain.api.mpi import MPIImplementation, MPIJob, MPIJobSpec, MPIReplicaType
from kubetrain.api.paddle import PaddleElasticPolicy, PaddleJob, PaddleJobSpec, PaddleReplicaType
from kubetrain.api.pytorch import ElasticPolicy, PyTorchJob, PyTorchJobSpec, PyTorchReplicaType
from kubetrain.api.tensorflow import SuccessPolicy, TFJob, TFJobSpec, TFReplicaType
from kubetrain.api.xgboost import XGBoostJob, XGBoostJobSpec, XGBoostReplicaType

__all__ = [
    "CleanPodPolicy",
    "ConditionStatus",
    "ConditionType",
    "Conversion",
    "ElasticPolicy",
    "FieldError",
    "JAXJob",
    "JAXJobSpec",
    "JAXReplicaType",
    "Job",
    "JobBase",
    "JobCondition",
    "JobStatus",
    "JobValidationError",
    "MPIImplementation",
    "MPIJob",
    "MPIJobSpec",
    "MPIReplicaType",
    "ObjectMeta",
    "PaddleElasticPolicy",
    "PaddleJob",
    "PaddleJobSpec",
    "PaddleReplicaType",
    "PyTorchJob",
    "PyTorchJobSpec",
    "PyTorchReplicaType",
    "ReplicaLimits",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "SuccessPolicy",
    "TFJob",
    "TFJobSpec",
    "TFReplicaType",
    "XGBoostJob",
    "XGBoostJobSpec",
    "XGBoostReplicaType",
    "all_crds",
    "apply_defaults",
    "convert",
    "crd_for",
    "crd_schema",
    "load_job",
    "load_job_file",
    "load_jobs_from_yaml",
]
