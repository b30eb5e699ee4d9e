"""cdk8s constructs: reusable building blocks of kubetrain stacks (every public construct
and its props, the way cdk8s-plus's index exports them). Three families have an index of
their own: :mod:`~kubetrain.constructs.queues` (Kueue), :mod:`~kubetrain.constructs.monitoring`
and :mod:`~kubetrain.constructs.samples`; a unit test holds every construct to one of them."""

from kubetrain._jsii import quiet_jsii

quiet_jsii()

# cdk8s' App and Chart, re-exported so that importing them from here keeps jsii quiet.
from cdk8s import App, Chart

from kubetrain.constructs.crds import KubeflowCrds, KubeflowCrdsProps
from kubetrain.constructs.jax_job import JAXJob, JAXJobProps
from kubetrain.constructs.job_common import Placement
from kubetrain.constructs.mpi_job import MPIJob, MPIJobProps
from kubetrain.constructs.namespace_exclusion import (
    NamespaceExclusionPolicy,
    NamespaceExclusionPolicyProps,
)
from kubetrain.constructs.nccl import NcclDebug, NcclProfile
from kubetrain.constructs.network_policy import (
    Egress,
    TrainingNetwork,
    TrainingNetworkPolicy,
    TrainingNetworkPolicyProps,
)
from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps, Taint
from kubetrain.constructs.node_tuning import NodeTuner, NodeTunerProps
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.operator_rbac import OperatorRbac, OperatorRbacProps
from kubetrain.constructs.paddle_job import PaddleJob, PaddleJobProps
from kubetrain.constructs.preflight import NcclPreflight, NcclPreflightProps
from kubetrain.constructs.pytorch_job import PyTorchJob, PyTorchJobProps
from kubetrain.constructs.runtime_protection import (
    RuntimeProtectionPolicy,
    RuntimeProtectionPolicyProps,
)
from kubetrain.constructs.runtime_queue import RuntimeQueuePolicy, RuntimeQueuePolicyProps
from kubetrain.constructs.runtimes import (
    JaxRuntime,
    MpiRuntime,
    MpiRuntimeProps,
    RuntimeFramework,
    RuntimeProps,
    TensorFlowRuntime,
    TorchRuntime,
    XGBoostRuntime,
)
from kubetrain.constructs.tf_job import TFJob, TFJobProps
from kubetrain.constructs.train_job import RuntimeKind, TrainJob, TrainJobProps
from kubetrain.constructs.trainer_access import TrainerUserAccess, TrainerUserAccessProps
from kubetrain.constructs.types import Image, Quantity, Resources
from kubetrain.constructs.xgboost_job import XGBoostJob, XGBoostJobProps

__all__ = [
    "App",
    "Chart",
    "Egress",
    "GpuNodePool",
    "GpuNodePoolProps",
    "Image",
    "JAXJob",
    "JAXJobProps",
    "JaxRuntime",
    "KubeflowCrds",
    "KubeflowCrdsProps",
    "MPIJob",
    "MPIJobProps",
    "MpiRuntime",
    "MpiRuntimeProps",
    "NamespaceExclusionPolicy",
    "NamespaceExclusionPolicyProps",
    "NcclDebug",
    "NcclPreflight",
    "NcclPreflightProps",
    "NcclProfile",
    "NodeTuner",
    "NodeTunerProps",
    "OperatorRbac",
    "OperatorRbacProps",
    "PaddleJob",
    "PaddleJobProps",
    "Placement",
    "PyTorchJob",
    "PyTorchJobProps",
    "Quantity",
    "Resources",
    "RuntimeFramework",
    "RuntimeKind",
    "RuntimeProps",
    "RuntimeProtectionPolicy",
    "RuntimeProtectionPolicyProps",
    "RuntimeQueuePolicy",
    "RuntimeQueuePolicyProps",
    "TFJob",
    "TFJobProps",
    "Taint",
    "TensorFlowRuntime",
    "TorchRuntime",
    "TrainJob",
    "TrainJobProps",
    "TrainerUserAccess",
    "TrainerUserAccessProps",
    "TrainingNetwork",
    "TrainingNetworkPolicy",
    "TrainingNetworkPolicyProps",
    "TrainingOperator",
    "TrainingOperatorProps",
    "XGBoostJob",
    "XGBoostJobProps",
    "XGBoostRuntime",
]
