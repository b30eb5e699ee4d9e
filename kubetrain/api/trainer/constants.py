"""Names of Kubeflow Trainer v2's API (``trainer.kubeflow.org/v1alpha1``), as upstream
v2.3.0 and the Kubeflow SDK spell them (its label keys and managedBy value are stated in
:mod:`kubetrain.api.keys`, with the other kinds' wire vocabulary)."""

from __future__ import annotations

from kubetrain.api.keys import (
    MANAGED_BY_MULTIKUEUE,
    MANAGED_BY_TRAINER,
    TRAINER_ANCESTOR_LABEL,
    TRAINER_FRAMEWORK_LABEL,
    TRAINER_PREFIX,
)

GROUP = TRAINER_PREFIX
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

TRAINJOB = "TrainJob"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
#: The kinds a TrainJob's ``runtimeRef`` may name.
RUNTIME_KINDS = (CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME)
#: ``runtimeRef`` defaults, as upstream's CRD writes them.
DEFAULT_RUNTIME_API_GROUP = GROUP
DEFAULT_RUNTIME_KIND = CLUSTER_TRAINING_RUNTIME

#: Runtime label the SDK requires (any value; ``torchtune`` selects its BuiltinTrainer).
FRAMEWORK_LABEL = TRAINER_FRAMEWORK_LABEL
#: Label of a replicated job's template naming the TrainJob step it runs.
ANCESTOR_LABEL = TRAINER_ANCESTOR_LABEL
ANCESTOR_TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
#: Each step's required container (and the name the SDK reads logs from).
NODE = "node"
LAUNCHER = "launcher"
STEP_CONTAINERS = {
    ANCESTOR_TRAINER: NODE,
    DATASET_INITIALIZER: DATASET_INITIALIZER,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
}
#: Containers whose environment only ``spec.trainer`` / ``spec.initializer`` may set.
ENV_OWNED_CONTAINERS = (NODE, DATASET_INITIALIZER, MODEL_INITIALIZER)

#: ``spec.managedBy`` values: upstream's controller (which kubetrain replaces: it serves the
#: same CRD) and Kueue's MultiKueue. Absent means the first.
MANAGED_BY_VALUES = (MANAGED_BY_TRAINER, MANAGED_BY_MULTIKUEUE)

#: Environment variables the frameworks inject into the ``node`` container, which a
#: TrainJob's ``spec.trainer.env`` may not set (upstream v2.3.0's reserved names, per
#: framework: torchrun, OpenMPI, XGBoost's tracker).
RESERVED_ENV: dict[str, tuple[str, ...]] = {
    "torch": (
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ),
    "mpi": (
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    ),
    "xgboost": ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"),
}
ALL_RESERVED_ENV: tuple[str, ...] = tuple(name for names in RESERVED_ENV.values() for name in names)
