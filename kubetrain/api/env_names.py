"""The names of the training environment: the variables through which the operator (and
``kubetrain run --local``, which applies the same framework rules) tells a training
process where it stands in its job and how to reach the others. Each name is stated once
here; the frameworks' modules (:mod:`kubetrain.frameworks`) say what each one is set to,
and :mod:`kubetrain.api.trainer.constants` which of them a TrainJob may not set itself.

The names are upstream's (training-operator v1.9, Trainer v2.3.0, mpi-operator v2beta1,
torchrun, Open MPI, Intel MPI, MPICH, the DMLC tracker, Paddle's launcher), so programs
written for the upstream operators read what they expect. The architecture test
(``tests/unit/test_architecture.py``) fails when one is written as a literal elsewhere.
"""

from __future__ import annotations

#: In every container of a PyTorch, XGBoost, JAX and Paddle job: output reaches the logs
#: as it is written.
PYTHONUNBUFFERED = "PYTHONUNBUFFERED"

# -- PyTorch (PyTorchJob; XGBoostJob's rendezvous uses the same four) -----------------------

MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
#: Processes in the job (nodes x processes per node), not pods.
WORLD_SIZE = "WORLD_SIZE"
#: The node's rank (Master 0, Worker ``i + 1``); torchrun gives each process its own.
RANK = "RANK"

# -- torchrun (PyTorchJob, torch TrainJobs): its options, read as PET_<OPTION> --------------

PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"
PET_NNODES = "PET_NNODES"
PET_NODE_RANK = "PET_NODE_RANK"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_RDZV_ENDPOINT = "PET_RDZV_ENDPOINT"
PET_RDZV_BACKEND = "PET_RDZV_BACKEND"
PET_RDZV_ID = "PET_RDZV_ID"
PET_RDZV_CONF = "PET_RDZV_CONF"
PET_MAX_RESTARTS = "PET_MAX_RESTARTS"
PET_STANDALONE = "PET_STANDALONE"
#: Set by the local runner only: each rank's output copied to the console, and where
#: torchrun keeps its logs.
PET_TEE = "PET_TEE"
PET_LOG_DIR = "PET_LOG_DIR"

# -- TensorFlow (TFJob) --------------------------------------------------------------------

TF_CONFIG = "TF_CONFIG"

# -- MPI (MPIJob v2beta1, MPI TrainJobs): the launcher's hostfile and SSH ------------------

#: ``launcher`` or ``worker``: the role of an MPIJob's pod.
MPI_JOB_ROLE = "K_MPI_JOB_ROLE"
OMPI_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
OMPI_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
OMPI_KEEP_FQDN_HOSTNAMES = "OMPI_MCA_orte_keep_fqdn_hostnames"
OMPI_SET_DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"
#: The variables OpenMPI's mpirun forwards from its own environment to every rank
#: (``;``-separated; the progress server's, when the job reports).
OMPI_ENV_LIST = "OMPI_MCA_mca_base_env_list"
INTEL_MPI_HOSTFILE = "I_MPI_HYDRA_HOST_FILE"
INTEL_MPI_BOOTSTRAP_ARGS = "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"
INTEL_MPI_PERHOST = "I_MPI_PERHOST"
MPICH_HOSTFILE = "HYDRA_HOST_FILE"
MPICH_LAUNCH_ARGS = "HYDRA_LAUNCH_EXTRA_ARGS"
#: Emptied on a launcher that only runs mpirun, so its node's GPUs stay free for workers.
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NVIDIA_DRIVER_CAPABILITIES = "NVIDIA_DRIVER_CAPABILITIES"

# -- XGBoost (XGBoostJob beside MASTER_ADDR..RANK; XGBoost TrainJobs: the DMLC tracker) ------

WORKER_PORT = "WORKER_PORT"
WORKER_ADDRS = "WORKER_ADDRS"
DMLC_TRACKER_URI = "DMLC_TRACKER_URI"
DMLC_TRACKER_PORT = "DMLC_TRACKER_PORT"
DMLC_TASK_ID = "DMLC_TASK_ID"
DMLC_NUM_WORKER = "DMLC_NUM_WORKER"

# -- JAX (JAXJob: what jax.distributed.initialize is passed; JAX TrainJobs: what it reads) --

COORDINATOR_PORT = "COORDINATOR_PORT"
COORDINATOR_ADDRESS = "COORDINATOR_ADDRESS"
NUM_PROCESSES = "NUM_PROCESSES"
PROCESS_ID = "PROCESS_ID"
JAX_NUM_PROCESSES = "JAX_NUM_PROCESSES"
JAX_PROCESS_ID = "JAX_PROCESS_ID"
JAX_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"

# -- Paddle (PaddleJob) ---------------------------------------------------------------------

PADDLE_MASTER = "PADDLE_MASTER"
PADDLE_NNODES = "PADDLE_NNODES"
PADDLE_JOB_ID = "PADDLE_JOB_ID"
PADDLE_SERVER_NUM = "PADDLE_SERVER_NUM"
PADDLE_TRAINER_NUM = "PADDLE_TRAINER_NUM"
#: The rendezvous pod's own IP, which its ``PADDLE_MASTER`` refers to.
PADDLE_POD_IP = "POD_IP_DUMMY"

# -- TrainJobs ------------------------------------------------------------------------------

#: A node's index in its replicated job, as the Job controller gives an indexed Job's pods.
JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: Where the Kubeflow SDK's progress reporting finds the operator's progress server, its CA
#: and its token (upstream's ``TrainJobStatus`` runtime plugin sets them).
TRAINER_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
TRAINER_SERVER_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TRAINER_SERVER_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"

# -- kubetrain's own -------------------------------------------------------------------------

#: The gang restart attempt a job's pods belong to (``policies/gang_restart``).
RESTART_ATTEMPT = "KUBETRAIN_RESTART_ATTEMPT"
#: Why the current attempt started: the failed pod's reason (``NodeLost``, ``Evicted``,
#: ``Error``, ...); absent in the first attempt.
RESTART_REASON = "KUBETRAIN_RESTART_REASON"
#: The last checkpoint the job's code reported (``status.progress.checkpoint``): its step
#: and location, in pods created after it was reported (a restart, a resume).
CHECKPOINT_STEP = "KUBETRAIN_CHECKPOINT_STEP"
CHECKPOINT_PATH = "KUBETRAIN_CHECKPOINT_PATH"
