"""Names of Kubeflow Trainer v2's API as the Trainer modules use them, taken from the
kinds table and the wire keys (:mod:`kubetrain.api.kinds`, :mod:`kubetrain.api.keys`),
plus the environment the ML policies reserve (named in :mod:`kubetrain.api.env_names`)."""

from __future__ import annotations

from kubetrain.api import env_names as E
from kubetrain.api import keys, kinds

GROUP = kinds.TRAINER_GROUP
VERSION = kinds.TRAINER_VERSION
API_VERSION = kinds.TRAINJOB.api_version

TRAINJOB = kinds.TRAINJOB.kind
TRAINING_RUNTIME = kinds.TRAINING_RUNTIME.kind
CLUSTER_TRAINING_RUNTIME = kinds.CLUSTER_TRAINING_RUNTIME.kind
#: The kinds a TrainJob's ``runtimeRef`` may name.
RUNTIME_KINDS = (CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME)
#: ``runtimeRef`` defaults, as upstream's CRD writes them.
DEFAULT_RUNTIME_API_GROUP = GROUP
DEFAULT_RUNTIME_KIND = CLUSTER_TRAINING_RUNTIME
#: Upstream's defaults of an MPI policy's key mount and a coscheduling gang's timeout.
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60

FRAMEWORK_LABEL = keys.TRAINER_FRAMEWORK_LABEL
ANCESTOR_LABEL = keys.TRAINER_ANCESTOR_LABEL
ANCESTOR_TRAINER = keys.TRAINER_STEP_TRAINER
NODE = keys.TRAINER_NODE_CONTAINER
STEP_CONTAINERS = keys.TRAINER_STEP_CONTAINERS
#: Containers whose environment only ``spec.trainer`` / ``spec.initializer`` may set.
ENV_OWNED_CONTAINERS = (
    NODE,
    keys.TRAINER_STEP_DATASET_INITIALIZER,
    keys.TRAINER_STEP_MODEL_INITIALIZER,
)

#: ``spec.managedBy`` values: upstream's controller (which kubetrain replaces: it serves the
#: same CRD) and Kueue's MultiKueue. Absent means the first.
MANAGED_BY_VALUES = (keys.MANAGED_BY_TRAINER, keys.MANAGED_BY_MULTIKUEUE)

#: Environment variables the ML policies inject into the ``node`` container, which a
#: TrainJob's ``spec.trainer.env`` may not set (upstream v2.3.0's reserved names: torchrun's,
#: OpenMPI's, the DMLC tracker's; :mod:`kubetrain.api.env_names` states them), in upstream's
#: order (the CRD's rule lists them so). The API layer lists them because its rules and the
#: CRD refuse them; each policy module (:mod:`kubetrain.frameworks.registry`) injects its
#: own and declares them reserved.
ALL_RESERVED_ENV: tuple[str, ...] = (
    E.PET_NNODES,
    E.PET_NPROC_PER_NODE,
    E.PET_NODE_RANK,
    E.PET_MASTER_ADDR,
    E.PET_MASTER_PORT,
    E.OMPI_HOSTFILE,
    E.OMPI_RSH_ARGS,
    E.OMPI_KEEP_FQDN_HOSTNAMES,
    E.OMPI_SET_DEFAULT_SLOTS,
    E.DMLC_TRACKER_URI,
    E.DMLC_TRACKER_PORT,
    E.DMLC_TASK_ID,
    E.DMLC_NUM_WORKER,
)
