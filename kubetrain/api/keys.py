"""Label and annotation keys, the values that name controllers, and the reason strings of
conditions and Events: the wire vocabulary the CRDs, the constructs, the operator and
the local runner share, each stated once here.

The ``training.kubeflow.org/`` keys (and the ``operator-name`` values in
:mod:`kubetrain.api.kinds`) are upstream Kubeflow's, so tools written for the upstream
operators (dashboards, Kueue, ``kubectl -l`` habits) keep working. The ``kubetrain.dev/``
keys are kubetrain's own additions.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubetrain.api import env_names as E
from kubetrain.api.kinds import KINDS, TRAINER_GROUP, kind_info

# -- labels on every child ------------------------------------------------------------------

PREFIX = "training.kubeflow.org"
OPERATOR_NAME = f"{PREFIX}/operator-name"
JOB_NAME = f"{PREFIX}/job-name"
REPLICA_TYPE = f"{PREFIX}/replica-type"
REPLICA_INDEX = f"{PREFIX}/replica-index"
JOB_ROLE = f"{PREFIX}/job-role"
#: The label upstream's mpi-operator also puts on an MPIJob's children.
APP = "app"

# -- kubetrain's annotations and labels ------------------------------------------------------

KUBETRAIN_PREFIX = "kubetrain.dev"
#: Hash of the desired child, so an unchanged child is not applied again.
SPEC_HASH_ANNOTATION = f"{KUBETRAIN_PREFIX}/spec-hash"
#: On an elastic TrainJob's node pods under Kueue: the node count Kueue admitted when the
#: pod was made (a larger numNodes waits for Kueue to admit it, controller/plugins/quota.py).
ADMITTED_NODES_ANNOTATION = f"{KUBETRAIN_PREFIX}/admitted-nodes"
#: Optional per-job override of the operator's startup timeout, in seconds.
STARTUP_TIMEOUT_ANNOTATION = f"{KUBETRAIN_PREFIX}/startup-timeout-seconds"
#: Optional per-job override of how long ranks still running after a job succeeded may
#: take to exit by themselves (``cleanPodPolicy`` unset), in seconds.
SUCCESS_GRACE_ANNOTATION = f"{KUBETRAIN_PREFIX}/success-grace-seconds"
#: The scheduling gate on a pod created before the pods it connects to are Ready (an
#: MPIJob's launcher under ``launcherCreationPolicy: AtStartup``); the operator removes it.
STARTUP_GATE = f"{KUBETRAIN_PREFIX}/startup"
#: Job annotation: ``Gang`` restarts every pod of the job when one fails (``Pod``, the
#: default, recreates only the failed pod).
RESTART_SCOPE_ANNOTATION = f"{KUBETRAIN_PREFIX}/restart-scope"
RESTART_SCOPES = ("Pod", "Gang")
#: Replica pod-template annotation: how many times the operator may recreate this replica
#: type's pods after failures (alongside the job-wide ``runPolicy.backoffLimit``).
MAX_RESTARTS_ANNOTATION = f"{KUBETRAIN_PREFIX}/max-restarts"
#: Job annotation: how many pods (or gang restarts) the operator may recreate after
#: infrastructure failures (eviction, preemption, a lost node, ``DisruptionTarget``), which
#: never count against ``runPolicy.backoffLimit``; a budget of their own, so a job on a
#: flapping cluster cannot restart forever either.
INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION = f"{KUBETRAIN_PREFIX}/infrastructure-restart-limit"
DEFAULT_INFRASTRUCTURE_RESTART_LIMIT = 10
#: Job annotation: the restart scope of infrastructure failures, ``Gang`` (the default but
#: for elastic jobs, whose ranks re-form without the lost one) or ``Pod``.
INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION = f"{KUBETRAIN_PREFIX}/infrastructure-restart-scope"
#: Job annotation: seconds a node may stay NotReady or unreachable before the job's pods on
#: it are moved (the operator's ``--node-lost-grace-seconds`` otherwise).
NODE_LOST_GRACE_ANNOTATION = f"{KUBETRAIN_PREFIX}/node-lost-grace-seconds"
#: Job annotation, ``"true"`` or ``"false"``: whether the job's pods stuck Terminating on a
#: lost node may be force-deleted (the operator's ``--force-delete-lost-pods`` otherwise).
#: Named after Kueue's ``kueue.x-k8s.io/safe-to-forcefully-delete``.
FORCE_DELETE_ANNOTATION = f"{KUBETRAIN_PREFIX}/safe-to-forcefully-delete"
#: Pod label: the gang attempt a pod belongs to (under restart scope Gang, and after a
#: gang restart of any job).
ATTEMPT_LABEL = f"{KUBETRAIN_PREFIX}/attempt"
#: A v1 job's pods get the progress server's environment (TrainJobs' always do).
REPORT_PROGRESS_ANNOTATION = f"{KUBETRAIN_PREFIX}/report-progress"
#: Hang detection (``controller/policies/hang``): seconds without a progress report
#: after which a running job's gang is restarted, and the same before its first report.
PROGRESS_TIMEOUT_ANNOTATION = f"{KUBETRAIN_PREFIX}/progress-timeout-seconds"
PROGRESS_STARTUP_TIMEOUT_ANNOTATION = f"{KUBETRAIN_PREFIX}/progress-startup-timeout-seconds"
PROGRESS_TIMEOUT_ANNOTATIONS = (PROGRESS_TIMEOUT_ANNOTATION, PROGRESS_STARTUP_TIMEOUT_ANNOTATION)
#: Hang restarts a job may use (``HangRestartLimitExceeded`` past it).
HANG_RESTART_LIMIT_ANNOTATION = f"{KUBETRAIN_PREFIX}/hang-restart-limit"
DEFAULT_HANG_RESTART_LIMIT = 3
HANG_RESTART_LIMIT_EXCEEDED = "HangRestartLimitExceeded"
#: Seconds a hung gang's pods get to end (a rank stuck in a collective cannot save a
#: consistent checkpoint, so it is not waited for as long as the pods' own grace).
HANG_TERMINATION_GRACE_SECONDS = 5
#: Environment variables: the gang attempt and why it started, for the training program.
ATTEMPT_ENV = E.RESTART_ATTEMPT
RESTART_REASON_ENV = E.RESTART_REASON
#: The linear-scaling arithmetic of a sample job, for people.
LEARNING_RATE_ANNOTATION = f"{KUBETRAIN_PREFIX}/learning-rate"
#: The node label naming a block (rail, rack, IB island) when the platform has none.
BLOCK_TOPOLOGY_LABEL = f"topology.{KUBETRAIN_PREFIX}/block"
#: Which GpuNodePool an object belongs to.
GPU_POOL_LABEL = f"{KUBETRAIN_PREFIX}/gpu-pool"
#: The node tuner's verdict on a node (``ok`` or failed checks), and its report.
NODE_TUNING_LABEL = f"{KUBETRAIN_PREFIX}/node-tuning"
NODE_TUNING_DETAIL_ANNOTATION = f"{KUBETRAIN_PREFIX}/node-tuning-detail"
NODE_TUNING_OK = "ok"

# -- other projects' keys kubetrain sets ----------------------------------------------------

#: Istio's sidecar switch: an injected sidecar never exits, so a pod never completes.
ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject"
#: The NVIDIA device plugin's resource and GPU Feature Discovery's product label.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Node conditions that make a node unhealthy for training by default: those of
#: node-problem-detector's default monitors that stop a node from running pods, and those
#: of NVIDIA NVSentinel's syslog health monitor (an Xid error, an SXid (NVSwitch/NVLink)
#: error, a GPU fallen off the bus).
NODE_PROBLEM_DETECTOR_CONDITIONS = ("KernelDeadlock", "ReadonlyFilesystem")
NVSENTINEL_CONDITIONS = ("SysLogsXIDError", "SysLogsSXIDError", "SysLogsGPUFallenOff")
DEFAULT_UNHEALTHY_NODE_CONDITIONS = (*NODE_PROBLEM_DETECTOR_CONDITIONS, *NVSENTINEL_CONDITIONS)
#: Seconds a node may be NotReady or unreachable before its training pods are moved.
DEFAULT_NODE_LOST_GRACE_SECONDS = 60

# -- runPolicy.managedBy ------------------------------------------------------------------

#: kubetrain's own ``runPolicy.managedBy`` value.
MANAGED_BY_KUBETRAIN = f"{KUBETRAIN_PREFIX}/operator"
#: The upstream operators' values: kubetrain is their drop-in replacement, so it acts on
#: jobs that name them.
MANAGED_BY_UPSTREAM = ("kubeflow.org/training-operator", "kubeflow.org/mpi-operator")
#: Kueue's MultiKueue: the job runs on another cluster; kubetrain leaves it alone.
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
#: Every value admitted (CEL and ``kubetrain validate``).
MANAGED_BY_VALUES = (MANAGED_BY_KUBETRAIN, *MANAGED_BY_UPSTREAM, MANAGED_BY_MULTIKUEUE)

# -- Kueue (kubetrain.constructs.queues and the jobs' queue= prop) -------------------------

KUEUE_GROUP = "kueue.x-k8s.io"
#: The Kueue API kubetrain writes: v1beta2, what Kueue v0.15 asks users to write (its
#: v1beta1 is served with the warning "This version is deprecated. Use v1beta2 instead.",
#: though it is still the stored version).
KUEUE_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
#: The label that puts a job into a LocalQueue of its namespace.
KUEUE_QUEUE_NAME_LABEL = f"{KUEUE_GROUP}/queue-name"
#: The label naming a job's WorkloadPriorityClass.
KUEUE_PRIORITY_CLASS_LABEL = f"{KUEUE_GROUP}/priority-class"
#: The LocalQueue name Kueue's LocalQueueDefaulting (beta, on by default since v0.12)
#: gives a job without a queue-name label, when its namespace has a LocalQueue so named.
KUEUE_DEFAULT_LOCAL_QUEUE = "default"

# -- Kubeflow Trainer v2 (kubetrain.api.trainer) -----------------------------------------------

TRAINER_PREFIX = TRAINER_GROUP
#: Runtime label the Kubeflow SDK requires (any value; ``torchtune`` selects its
#: BuiltinTrainer); runtimes without it are skipped by ``list_runtimes``.
TRAINER_FRAMEWORK_LABEL = f"{TRAINER_PREFIX}/framework"
#: Label of a runtime's replicated job naming the TrainJob step it runs (``trainer``,
#: ``dataset-initializer``, ``model-initializer``).
TRAINER_ANCESTOR_LABEL = f"{TRAINER_PREFIX}/trainjob-ancestor-step"
#: Upstream Trainer's ``spec.managedBy`` value, its CRD's default: kubetrain serves the same
#: CRD in its place and reconciles TrainJobs that name it (or none).
MANAGED_BY_TRAINER = f"{TRAINER_PREFIX}/trainjob-controller"
#: Values kubetrain reconciles (absent means kubetrain too).
MANAGED_BY_ACCEPTED = frozenset({MANAGED_BY_KUBETRAIN, *MANAGED_BY_UPSTREAM, MANAGED_BY_TRAINER})
#: The steps a runtime's replicated jobs are labelled with, and each step's container (the
#: name the Kubeflow SDK reads logs from; a launcher's container is also ``node``).
TRAINER_STEP_TRAINER = "trainer"
TRAINER_STEP_DATASET_INITIALIZER = "dataset-initializer"
TRAINER_STEP_MODEL_INITIALIZER = "model-initializer"
TRAINER_NODE_CONTAINER = "node"
#: Resource keys the Kubeflow SDK maps to a device (``nvidia.com/mig-`` is a prefix), in
#: the order it tries them; limits with none of them make it raise (kubeflow/sdk#516).
KUBEFLOW_SDK_DEVICE_KEYS = (
    GPU_RESOURCE,
    "google.com/tpu",
    "nvidia.com/mig-",
    "huawei.com/Ascend910",
    "cpu",
)
#: JobSet's and the Job controller's pod labels, which the Kubeflow SDK reads to find a
#: TrainJob's pods and their ranks (kubetrain creates the pods itself and sets them).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: The annotation the operator keeps on a runtime while TrainJobs reference it: the
#: runtime-protection ValidatingAdmissionPolicy refuses to delete a runtime carrying it
#: while the operator is deployed (kubeflow/sdk#797: the SDK cannot read a job whose
#: runtime is gone); nothing ever waits on it.
RUNTIME_IN_USE_ANNOTATION = f"{KUBETRAIN_PREFIX}/runtime-in-use"
#: What kubetrain 0.1 kept on runtimes in use instead: a finalizer, which left a runtime
#: Terminating for good once the operator was gone. The operator removes it.
RUNTIME_IN_USE_FINALIZER = f"{KUBETRAIN_PREFIX}/runtime-in-use"
#: The request header on each write the leader fence let through: this process's
#: CLOCK_MONOTONIC (seconds) when the fence checked it. A request checked just before the
#: process froze still goes out after it wakes; the header tells such a write apart from
#: one the fence should have stopped (the fault tests compare it with the freeze).
FENCE_CHECKED_HEADER = "Kubetrain-Fence-Checked"
TRAINER_STEP_CONTAINERS = {
    TRAINER_STEP_TRAINER: TRAINER_NODE_CONTAINER,
    TRAINER_STEP_DATASET_INITIALIZER: TRAINER_STEP_DATASET_INITIALIZER,
    TRAINER_STEP_MODEL_INITIALIZER: TRAINER_STEP_MODEL_INITIALIZER,
}

# -- condition and Event reasons (beyond upstream's <Kind><Verb>) ---------------------------

TRAINJOB_COMPLETE_REASON = "AllJobsCompleted"
"""The reason upstream Trainer v2 gives a TrainJob's ``Complete`` condition (JobSet's)."""
TRAINJOB_COMPLETE_MESSAGE = "jobset completed successfully"
"""Its message (JobSet's, word for word: upstream's e2e suite compares it); kubetrain's
own account of the success is in ``status.kubetrain``."""
TRAINJOB_FAILED_JOBS_REASON = "FailedJobs"
"""The reason upstream Trainer v2 gives a TrainJob's ``Failed`` condition when one of its
Jobs failed (JobSet's); kubetrain's precise cause stays in the message."""
TRAINJOB_SUSPENDED_REASON = "Suspended"
"""The reason upstream Trainer v2 gives a TrainJob's ``Suspended`` condition."""

INVALID_SPEC = "InvalidSpec"
"""The job's content is invalid (the typed API or the API server rejected it)."""
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
"""A failure needed a restart and ``runPolicy.backoffLimit`` restarts were used up."""
INFRASTRUCTURE_RESTART_LIMIT_EXCEEDED = "InfrastructureRestartLimitExceeded"
"""kubetrain: an infrastructure failure needed a restart and the job's
``kubetrain.dev/infrastructure-restart-limit`` restarts were used up."""
DEADLINE_EXCEEDED = "DeadlineExceeded"
"""``runPolicy.activeDeadlineSeconds`` passed since ``status.startTime``."""
STARTUP_TIMEOUT = "StartupTimeout"
"""Pods another replica waits for (a Master, MPI workers) did not become Ready in time."""
CHILD_NAME_CONFLICT = "ChildNameConflict"
"""A child's name is taken by an object the job does not control; it is left untouched."""
CHILD_REFUSED = "ChildRefused"
"""The API server refused a child (admission policy, quota, RBAC); see the message."""
STARTUP_WAITING = "WaitingForReplicas"
"""Event: a gated replica (MPI launcher, PyTorch workers) waits for the pods it needs."""
TTL_EXPIRED = "TTLExpired"
"""Event: the job finished ``ttlSecondsAfterFinished`` ago and is deleted."""
RUNTIME_NOT_FOUND = "RuntimeNotFound"
"""A TrainJob's ``runtimeRef`` names no runtime (after a short wait for it to appear)."""
GANG_SCHEDULER_UNAVAILABLE = "GangSchedulerUnavailable"
"""A TrainJob's runtime asks for a gang scheduler the operator does not run."""
GANG_SCHEDULER_MISSING = "GangSchedulerMissing"
"""The operator's gang scheduler's PodGroup API is not served: the job's pods wait."""
GANG_WAITING = "WaitingForGang"
"""Condition reason: the gang scheduler has not placed the whole gang yet."""
MANAGED_ELSEWHERE = "ManagedByOtherController"
"""Event: ``runPolicy.managedBy`` names another controller."""
SCALED_UP = "ScaledUp"
"""Event: the job's scaled replicas grew (its HPA, ``kubectl scale`` or an edit)."""
SCALED_DOWN = "ScaledDown"
"""Event: the job's scaled replicas shrank."""


# -- selectors ----------------------------------------------------------------------------


def operator_name_selector(kinds: Iterable[str] = KINDS) -> str:
    """The label selector of the children of ``kinds`` (what the child informers watch)."""
    values = ",".join(sorted(kind_info(k).operator_name for k in kinds))
    return f"{OPERATOR_NAME} in ({values})"


def job_labels(kind: str, job_name: str) -> dict[str, str]:
    """``operator-name`` and ``job-name``: what every child of a job carries."""
    return {OPERATOR_NAME: kind_info(kind).operator_name, JOB_NAME: job_name}


def job_selector(kind: str, job_name: str, replica_type: str | None = None) -> str:
    """The serialized selector of a job's pods (``replicaStatuses[*].selector``)."""
    parts = [f"{JOB_NAME}={job_name}", f"{OPERATOR_NAME}={kind_info(kind).operator_name}"]
    if replica_type is not None:
        parts.append(f"{REPLICA_TYPE}={replica_type.lower()}")
    return ",".join(parts)
