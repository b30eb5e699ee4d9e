"""Training runtimes (Kubeflow Trainer v2's ``ClusterTrainingRuntime`` /
``TrainingRuntime``) as typed constructs: the templates data scientists pick by name from
the Kubeflow SDK (``TrainerClient().train(runtime="torch-h100-ib", ...)``), built from
what the platform already knows: its GPU node pools and NCCL fabric profiles, its images
and its restart model.

One construct per framework: :class:`TorchRuntime`, :class:`MpiRuntime` (Horovod or
DeepSpeed), :class:`JaxRuntime`, :class:`XGBoostRuntime` and :class:`TensorFlowRuntime`
(MultiWorkerMirroredStrategy, which upstream lacks: kubetrain's operator gives its nodes
``TF_CONFIG``). Props are the job constructs' (image, command, env, GPUs, resources, an
NCCL ``profile`` or a ``node_pool`` binding, placement, the escape hatch) plus the runtime's
own (node count, restart policy, backoff limit, TTL, scope), checked when made.

Every runtime carries what the Kubeflow SDK needs (the ``trainer.kubeflow.org/framework``
label, the ancestor-labelled replicated job with a ``node`` container, an image) and keeps
the SDK able to read its jobs back: the SDK raises on every read of a job whose ``node``
limits hold none of ``cpu``, ``nvidia.com/gpu``, TPU, MIG or Ascend (kubeflow/sdk#516), so
when a runtime's ``node`` container would have only other limits (an RDMA or EFA device on
a CPU node, a memory limit), the construct adds a ``cpu`` limit equal to its request (or
1) and warns at synth time. With a GPU limit present (the device an NCCL profile's RDMA
resources go with), the SDK finds the GPU first and ignores the rest.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.api.errors import JobValidationError
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME
from kubetrain.api.trainer.loader import load_trainer_object
from kubetrain.constructs.job_common import JobProps, Placement, pod_template
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.runtime_queue import RuntimeQueuePolicy, RuntimeQueuePolicyProps
from kubetrain.constructs.types import Resources
from kubetrain.frameworks import jax, mpi, pytorch, tensorflow, xgboost
from kubetrain.frameworks.policy import TrainJobPolicy

API_VERSION = TRAINING_RUNTIME.api_version
NODE = K.TRAINER_NODE_CONTAINER
#: OpenMPI's default ``ssh`` port and where the SSH keys go, as kubetrain's Horovod image
#: expects them (root, ``sshd -De`` on 22).
DEFAULT_SSH_PORT = 22
DEFAULT_SSH_MOUNT = "/root/.ssh"


class RuntimeFramework(StrEnum):
    """The ``trainer.kubeflow.org/framework`` label value (what ``list_runtimes`` shows)."""

    TORCH = "torch"
    DEEPSPEED = "deepspeed"
    HOROVOD = "horovod"
    JAX = "jax"
    XGBOOST = "xgboost"
    TENSORFLOW = "tensorflow"


@dataclass(frozen=True, kw_only=True)
class RuntimeProps(JobProps):
    """Props of every runtime construct: the job props (``image`` required; ``command``,
    ``args``, ``env``, ``gpus_per_node``, ``resources``, ``profile`` or ``node_pool``,
    ``placement``, ``labels``, ``pod_labels``, ``annotations``, ``patch_pod_template``,
    ``service_account_token``) plus the runtime's own. ``run_policy`` does not apply (a
    TrainJob carries its own suspend, deadline and managedBy)."""

    num_nodes: int = 1
    """Nodes a TrainJob of this runtime runs unless it sets ``trainer.numNodes``."""
    cluster_scoped: bool = True
    """A ClusterTrainingRuntime (every namespace may use it), else a TrainingRuntime in
    ``namespace``. Default: cluster-scoped."""
    restart_policy: str = "OnFailure"
    """The pods' restartPolicy: ``OnFailure`` (containers restart in place) or ``Never``."""
    backoff_limit: int | None = None
    """Restarts a TrainJob may use (the trainer's Job ``backoffLimit``). Default: 6."""
    ttl_seconds_after_finished: int | None = None
    """Delete a finished TrainJob's pods this long after it ended. Default: keep them."""
    run_as_user: int | None = None
    """Run the containers as this user (and give the pod's volumes that group), for images
    built around a non-root user (upstream's DeepSpeed image: 1000). Default: the image's."""

    # ``queue`` (from JobProps) on a runtime: every TrainJob of the runtime must carry
    # that LocalQueue's label (see kubetrain.constructs.runtime_queue).

    @property
    def queue_in_namespace(self) -> bool:
        # A cluster runtime's queue is a LocalQueue name every team namespace has.
        return not self.cluster_scoped

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workload_priority_class is not None:
            raise ValueError(
                f"workload_priority_class ({self.workload_priority_class!r}) is set on a "
                f"runtime: Kueue reads it from each TrainJob's own label "
                f"{K.KUEUE_PRIORITY_CLASS_LABEL}; set it there (Kubeflow SDK: "
                "options=[Labels(...)])"
            )
        if self.run_policy is not None:
            raise ValueError(
                "run_policy is set on a runtime: a TrainJob carries its own suspend, "
                "activeDeadlineSeconds and managedBy; use restart_policy, backoff_limit and "
                "ttl_seconds_after_finished here"
            )
        if not 1 <= self.num_nodes <= 1000:
            raise ValueError(f"num_nodes ({self.num_nodes}) must be between 1 and 1000")
        if self.restart_policy not in ("OnFailure", "Never"):
            raise ValueError(
                f"restart_policy ({self.restart_policy!r}) must be OnFailure or Never (a "
                "runtime's pods are a batch Job's)"
            )
        for prop in ("backoff_limit", "ttl_seconds_after_finished", "run_as_user"):
            value = getattr(self, prop)
            if value is not None and value < 0:
                raise ValueError(f"{prop} ({value}) must be >= 0")


@dataclass(frozen=True, kw_only=True)
class MpiRuntimeProps(RuntimeProps):
    """An MPI runtime: ``node`` pods serve ``sshd``; the launcher runs ``mpirun`` (the
    ``command``) against the hostfile the operator writes at ``/etc/mpi/hostfile``."""

    flavor: RuntimeFramework = RuntimeFramework.HOROVOD
    """``horovod`` or ``deepspeed`` (the framework label)."""
    slots_per_node: int = 1
    """MPI slots per node (``mpi.numProcPerNode``); 1 on multi-GPU nodes means one per
    GPU."""
    run_launcher_as_node: bool = False
    """The launcher also runs ranks (counts as one of the nodes)."""
    ssh_auth_mount_path: str = DEFAULT_SSH_MOUNT
    """Where the SSH key pair is mounted in every ``node`` container."""
    node_command: tuple[str, ...] = ("/usr/sbin/sshd", "-De")
    """What the ``node`` pods run."""
    ssh_port: int = DEFAULT_SSH_PORT
    """The port ``sshd`` listens on (the nodes' readiness probe)."""
    launcher_resources: Resources | None = None
    """The launcher's CPU and memory when it runs no ranks. Default: ``resources``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.flavor not in (RuntimeFramework.HOROVOD, RuntimeFramework.DEEPSPEED):
            raise ValueError(f"flavor ({str(self.flavor)!r}) must be horovod or deepspeed")
        if self.slots_per_node < 1:
            raise ValueError(f"slots_per_node ({self.slots_per_node}) must be >= 1")
        if not self.ssh_auth_mount_path.startswith("/"):
            raise ValueError(
                f"ssh_auth_mount_path ({self.ssh_auth_mount_path!r}) must be an absolute path"
            )
        if not 1 <= self.ssh_port <= 65535:
            raise ValueError(f"ssh_port ({self.ssh_port}) must be between 1 and 65535")
        if not self.node_command:
            raise ValueError("node_command (empty) must start sshd in the foreground")


def _known_device(limits: dict[str, Any]) -> bool:
    prefixes = tuple(k for k in K.KUBEFLOW_SDK_DEVICE_KEYS if k.endswith("-"))
    exact = {k for k in K.KUBEFLOW_SDK_DEVICE_KEYS if not k.endswith("-")}
    return any(k in exact or k.startswith(prefixes) for k in limits)


class RuntimeConstruct(constructs.Construct):
    """What every runtime construct does (see the module docs)."""

    #: The framework's ML policy (its entry of :mod:`kubetrain.frameworks.registry`): the
    #: runtime's ``mlPolicy`` entry, framework label and node port are read from it.
    policy: TrainJobPolicy

    def __init__(self, scope: constructs.Construct, id: str, props: RuntimeProps) -> None:
        if not hasattr(type(self), "policy"):
            raise TypeError(
                f"{type(self).__name__} is not a runtime of one framework: use TorchRuntime, "
                "MpiRuntime, JaxRuntime, XGBoostRuntime or TensorFlowRuntime"
            )
        super().__init__(scope, id)
        self.props = props
        self.framework = self.framework_label()
        self.name = props.name or id.lower()
        #: What the construct changed so the Kubeflow SDK can read its jobs (also warned).
        self.sdk_notes: list[str] = []
        spec = {
            "mlPolicy": {"numNodes": props.num_nodes, **self.ml_policy()},
            "template": {"spec": self._jobset()},
        }
        meta: dict[str, Any] = {
            "name": self.name,
            "labels": {**props.labels, K.TRAINER_FRAMEWORK_LABEL: self.framework.value},
        }
        if props.annotations:
            meta["annotations"] = dict(props.annotations)
        if not props.cluster_scoped:
            meta["namespace"] = props.namespace
        kind = (CLUSTER_TRAINING_RUNTIME if props.cluster_scoped else TRAINING_RUNTIME).kind
        manifest = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}
        try:
            self.runtime = load_trainer_object(manifest, source=self.node.path)
        except JobValidationError as exc:
            raise ValueError(str(exc)) from None
        api_object(self, "Resource", self.runtime.to_wire())
        if props.queue_name is not None:
            RuntimeQueuePolicy(
                self,
                "QueuePolicy",
                RuntimeQueuePolicyProps(
                    runtime=self.name,
                    queue=props.queue_name,
                    namespace=None if props.cluster_scoped else props.namespace,
                ),
            )

    # -- what each framework says ---------------------------------------------------------

    def framework_label(self) -> RuntimeFramework:
        """The ``trainer.kubeflow.org/framework`` label: by default its policy's name."""
        return RuntimeFramework(self.policy.name)

    def ml_policy(self) -> dict[str, Any]:
        """The framework's ``mlPolicy`` entry (besides ``numNodes``): by default its policy's
        source field, empty (``torch: {}``)."""
        return {self.policy.name: {}} if self.policy.ml_policy_source else {}

    def replicated_jobs(self) -> list[dict[str, Any]]:
        """The JobSet's replicated jobs: by default one ``node`` job, the trainer."""
        return [self._job(NODE, self._node_template(), trainer=True)]

    def node_port(self) -> int | None:
        """The port a node listens on for its peers (declared on the container): its
        policy's rank port."""
        return self.policy.rank_port

    # -- building blocks -------------------------------------------------------------------

    def success_targets(self) -> list[str] | None:
        """The replicated jobs whose success is the TrainJob's (None: all of them)."""
        return None

    def _jobset(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"replicatedJobs": self.replicated_jobs()}
        targets = self.success_targets()
        if targets is not None:
            spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": targets}
        if self.props.ttl_seconds_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = self.props.ttl_seconds_after_finished
        return spec

    def _job(
        self,
        name: str,
        template: dict[str, Any],
        *,
        trainer: bool,
        depends_on: tuple[str, str] | None = None,
    ) -> dict[str, Any]:
        job_template: dict[str, Any] = {"spec": {"template": template}}
        if trainer:
            job_template["metadata"] = {
                "labels": {K.TRAINER_ANCESTOR_LABEL: K.TRAINER_STEP_TRAINER}
            }
            if self.props.backoff_limit is not None:
                job_template["spec"]["backoffLimit"] = self.props.backoff_limit
        job: dict[str, Any] = {"name": name, "template": job_template}
        if depends_on is not None:
            job["dependsOn"] = [{"name": depends_on[0], "status": depends_on[1]}]
        return job

    def _node_template(
        self,
        *,
        command: tuple[str, ...] | None = None,
        args: tuple[str, ...] | None = None,
        gpus: int | None = None,
        resources: Resources | None = None,
        replica_type: str = NODE,
    ) -> dict[str, Any]:
        props = self.props
        template = pod_template(
            props,
            name=self.name,
            replica_type=replica_type,
            container=NODE,
            command=command,
            args=args,
            gpus=gpus,
            resources=resources,
            place=False,
        )
        template["spec"]["restartPolicy"] = props.restart_policy
        port = self.node_port()
        container = template["spec"]["containers"][0]
        if props.run_as_user is not None:
            template["spec"].setdefault("securityContext", {})["fsGroup"] = props.run_as_user
            container.setdefault("securityContext", {})["runAsUser"] = props.run_as_user
        if port is not None:
            container.setdefault("ports", []).append({"containerPort": port, "protocol": "TCP"})
        self._keep_sdk_readable(container, replica_type)
        return self._place(template)

    def _place(self, template: dict[str, Any]) -> dict[str, Any]:
        """Same-block placement for the pods of one TrainJob: pod affinity on the
        TrainJob's JobSet label, its value taken from each pod (``matchLabelKeys``)."""
        props = self.props
        if props.placement is Placement.ANY:
            return template
        key = props.topology_key or (
            props.node_pool.topology_key
            if props.node_pool is not None
            else "topology.kubernetes.io/zone"
        )
        term = {
            "labelSelector": {
                "matchExpressions": [{"key": K.JOBSET_NAME_LABEL, "operator": "Exists"}]
            },
            "matchLabelKeys": [K.JOBSET_NAME_LABEL],
            "topologyKey": key,
        }
        out = copy.deepcopy(template)
        affinity = out["spec"].setdefault("affinity", {}).setdefault("podAffinity", {})
        if props.placement is Placement.SAME_BLOCK:
            affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
                {"weight": 100, "podAffinityTerm": term}
            )
        return out

    def _keep_sdk_readable(self, container: dict[str, Any], replica_type: str) -> None:
        limits = (container.get("resources") or {}).get("limits") or {}
        if not limits or _known_device(limits):
            return
        requests = container["resources"].get("requests") or {}
        cpu = requests.get("cpu", "1")
        limits["cpu"] = cpu
        note = (
            f"{self.node.path}: the {replica_type} job's node container had limits "
            f"({', '.join(sorted(k for k in limits if k != 'cpu'))}) but no cpu or GPU: the "
            "Kubeflow SDK cannot read jobs of such a runtime (kubeflow/sdk#516), so a cpu "
            f"limit of {cpu} (its request) was added"
        )
        self.sdk_notes.append(note)
        warnings.warn(note, RuntimeWarning, stacklevel=4)


class TorchRuntime(RuntimeConstruct):
    """PyTorch (torchrun): the operator gives every node ``PET_NNODES``,
    ``PET_NPROC_PER_NODE`` (``auto`` on GPU nodes, the node's CPUs otherwise),
    ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT``."""

    policy = pytorch.POLICY


class JaxRuntime(RuntimeConstruct):
    """JAX: ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``, ``JAX_COORDINATOR_ADDRESS``."""

    policy = jax.POLICY


class XGBoostRuntime(RuntimeConstruct):
    """XGBoost: the DMLC tracker on node 0 (``DMLC_TRACKER_URI``, ``DMLC_TASK_ID``, ...)."""

    policy = xgboost.POLICY


class TensorFlowRuntime(RuntimeConstruct):
    """TensorFlow MultiWorkerMirroredStrategy: no upstream policy exists, so the runtime has
    none and is labelled ``tensorflow``; kubetrain's operator gives each node
    ``TF_CONFIG`` (every node a worker on port 2222)."""

    policy = tensorflow.POLICY


class MpiRuntime(RuntimeConstruct):
    """MPI (OpenMPI over SSH) for Horovod or DeepSpeed: ``node`` pods serve ``sshd``, the
    launcher (the trainer: the SDK's command or ``command``) starts once they are Ready,
    with the hostfile at ``/etc/mpi/hostfile``."""

    props: MpiRuntimeProps
    policy = mpi.POLICY

    def __init__(self, scope: constructs.Construct, id: str, props: MpiRuntimeProps) -> None:
        super().__init__(scope, id, props)

    def framework_label(self) -> RuntimeFramework:
        return self.props.flavor

    def ml_policy(self) -> dict[str, Any]:
        props = self.props
        return {
            self.policy.name: {
                "numProcPerNode": props.slots_per_node,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": props.ssh_auth_mount_path,
                "runLauncherAsNode": props.run_launcher_as_node,
            }
        }

    def success_targets(self) -> list[str] | None:
        return ["launcher"]  # the nodes serve sshd and never end

    def replicated_jobs(self) -> list[dict[str, Any]]:
        props = self.props
        node = self._node_template(command=props.node_command, args=(), replica_type="node")
        node["spec"]["containers"][0]["readinessProbe"] = {
            "tcpSocket": {"port": props.ssh_port},
            "periodSeconds": 5,
        }
        launcher_gpus = None if props.run_launcher_as_node else 0
        launcher_resources = None if props.run_launcher_as_node else props.launcher_resources
        launcher = self._node_template(
            gpus=launcher_gpus, resources=launcher_resources, replica_type="launcher"
        )
        return [
            self._job("node", node, trainer=False),
            self._job("launcher", launcher, trainer=True, depends_on=("node", "Ready")),
        ]
