"""``TrainJob``: a typed run of a training runtime (Kubeflow Trainer v2's
``trainer.kubeflow.org/v1alpha1`` TrainJob), what the Kubeflow SDK's ``train()`` creates and
what a platform team's sample or smoke-test job in a stack is.

The runtime is named by name and kind (a ClusterTrainingRuntime unless told otherwise,
as Trainer defaults it) or given as a runtime construct of the app (``TorchRuntime``, ...),
whose name, kind and queue the TrainJob then takes. The TrainJob overrides what a run
changes: the trainer's image, command, args, env, node count, resources and processes
per node. The pod settings (NCCL profile, node pool, placement, restarts) are the
runtime's. The manifest is checked by the typed Trainer API (the CRD's rules and
Trainer's webhook's) when the construct is made.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import constructs

from kubetrain.api import keys as K
from kubetrain.api.errors import JobValidationError
from kubetrain.api.kinds import TRAINJOB
from kubetrain.api.trainer import TrainJob as TrainJobModel
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer import load_trainer_object
from kubetrain.api.trainer.sdk import sdk_reads_limits
from kubetrain.constructs.job_common import (
    JobMetaProps,
    check_env_names,
    check_gpus,
    job_name,
    metadata,
)
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.runtimes import RuntimeConstruct
from kubetrain.constructs.types import Image, Resources


class RuntimeKind(StrEnum):
    """The kinds of runtime a TrainJob may name (``spec.runtimeRef.kind``)."""

    CLUSTER_TRAINING_RUNTIME = T.CLUSTER_TRAINING_RUNTIME
    """A cluster-scoped runtime, which every namespace may use (Trainer's default)."""
    TRAINING_RUNTIME = T.TRAINING_RUNTIME
    """A runtime of the TrainJob's own namespace."""


@dataclass(frozen=True, kw_only=True)
class TrainJobProps(JobMetaProps):
    """Props of :class:`TrainJob`: the job object's (``name``, ``namespace``, ``labels``,
    ``annotations``, ``queue``, ``workload_priority_class``), the runtime, and the trainer
    overrides. Every trainer override left out is the runtime's."""

    runtime: str | RuntimeConstruct
    """The runtime: a runtime construct (``TorchRuntime``, ``MpiRuntime``, ...), or the name
    of one (see ``runtime_kind``)."""
    runtime_kind: RuntimeKind | None = None
    """The kind of a runtime given by name. Default: ClusterTrainingRuntime (Trainer's
    default); a runtime construct's own kind."""
    image: Image | None = None
    """The trainer's image. Default: the runtime's."""
    command: tuple[str, ...] = ()
    """The trainer's command. Default: the runtime's."""
    args: tuple[str, ...] = ()
    """The trainer's arguments. Default: the runtime's."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables merged into the trainer's environment (those the runtime's framework
    injects, e.g. ``PET_NNODES``, are refused). Default: none."""
    num_nodes: int | None = None
    """Training nodes. Default: the runtime's ``mlPolicy.numNodes``."""
    gpus_per_node: int | None = None
    """GPUs of each node (its ``nvidia.com/gpu`` limit). Default: the runtime's."""
    resources_per_node: Resources = field(default_factory=Resources)
    """CPU and memory of each node's trainer, replacing the runtime's for the resources it
    names (GPUs come from ``gpus_per_node``). Default: the runtime's."""
    num_proc_per_node: int | None = None
    """Processes per node (torch; MPI: slots). Default: the runtime's (torch: one per GPU,
    or the node's CPUs without GPUs)."""
    suspend: bool = False
    """Create the TrainJob suspended (no pods until it is resumed)."""
    active_deadline_seconds: int | None = None
    """Fail the TrainJob this long after it started or resumed. Default: no deadline."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.runtime, str) and not self.runtime:
            raise ValueError(
                "runtime ('') must name a runtime (a ClusterTrainingRuntime, or a "
                "TrainingRuntime with runtime_kind) or be a runtime construct"
            )
        check_gpus(
            self.gpus_per_node,
            self.resources_per_node,
            "resources_per_node",
            f"the {K.GPU_RESOURCE} limit of each node",
        )
        check_env_names(self.env)
        if isinstance(self.runtime, RuntimeConstruct):
            self._check_runtime_construct(self.runtime)

    def _check_runtime_construct(self, runtime: RuntimeConstruct) -> None:
        kind = RuntimeKind(runtime.runtime.kind)
        if self.runtime_kind is not None and self.runtime_kind is not kind:
            raise ValueError(
                f"runtime_kind ({self.runtime_kind}) contradicts runtime ({runtime.name!r}), "
                f"a {kind}: drop runtime_kind"
            )
        if kind is RuntimeKind.TRAINING_RUNTIME and runtime.props.namespace != self.namespace:
            raise ValueError(
                f"runtime ({runtime.name!r}) is a {kind} of namespace "
                f"{runtime.props.namespace!r}, but the TrainJob runs in {self.namespace!r}: a "
                f"TrainJob can only use a {kind} of its own namespace, or a "
                f"{RuntimeKind.CLUSTER_TRAINING_RUNTIME}"
            )
        own, required = super().queue_name, runtime.props.queue_name
        if own is not None and required is not None and own != required:
            raise ValueError(
                f"queue ({own!r}) differs from runtime ({runtime.name!r})'s queue "
                f"{required!r}: the runtime's admission policy refuses such a TrainJob; drop "
                f"queue or set it to {required!r}"
            )

    @property
    def runtime_name(self) -> str:
        """The name in ``runtimeRef``."""
        return self.runtime if isinstance(self.runtime, str) else self.runtime.name

    @property
    def runtime_ref_kind(self) -> RuntimeKind:
        """The kind in ``runtimeRef``, after defaulting."""
        if isinstance(self.runtime, RuntimeConstruct):
            return RuntimeKind(self.runtime.runtime.kind)
        return self.runtime_kind or RuntimeKind(T.DEFAULT_RUNTIME_KIND)

    @property
    def queue_name(self) -> str | None:
        """The LocalQueue's name: ``queue``'s, else the runtime construct's (its admission
        policy refuses a TrainJob without it), else None."""
        own = super().queue_name
        if own is None and isinstance(self.runtime, RuntimeConstruct):
            return self.runtime.props.queue_name
        return own


class TrainJob(constructs.Construct):
    """A TrainJob of a runtime; child id ``Resource``. ``trainjob`` is the typed object."""

    def __init__(self, scope: constructs.Construct, id: str, props: TrainJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.name = job_name(props, id)
        #: What the construct changed so the Kubeflow SDK can read the TrainJob (also warned).
        self.sdk_notes: list[str] = []
        spec: dict[str, Any] = {
            "runtimeRef": {"name": props.runtime_name, "kind": props.runtime_ref_kind.value}
        }
        trainer = self._trainer()
        if trainer:
            spec["trainer"] = trainer
        if props.suspend:
            spec["suspend"] = True
        if props.active_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = props.active_deadline_seconds
        manifest = {
            "apiVersion": TRAINJOB.api_version,
            "kind": TRAINJOB.kind,
            "metadata": metadata(props, self.name),
            "spec": spec,
        }
        try:
            trainjob = load_trainer_object(manifest, source=self.node.path)
        except JobValidationError as exc:
            raise ValueError(str(exc)) from None
        assert isinstance(trainjob, TrainJobModel)
        self.trainjob = trainjob
        api_object(self, "Resource", trainjob.to_wire())

    def _trainer(self) -> dict[str, Any]:
        props = self.props
        trainer: dict[str, Any] = {}
        if props.image is not None:
            trainer["image"] = str(props.image)
        if props.command:
            trainer["command"] = list(props.command)
        if props.args:
            trainer["args"] = list(props.args)
        if props.env:
            trainer["env"] = [{"name": k, "value": v} for k, v in sorted(props.env.items())]
        if props.num_nodes is not None:
            trainer["numNodes"] = props.num_nodes
        if props.num_proc_per_node is not None:
            trainer["numProcPerNode"] = props.num_proc_per_node
        gpus = props.gpus_per_node or 0
        resources = dataclasses.replace(props.resources_per_node, gpus=gpus).to_wire()
        if resources:
            trainer["resourcesPerNode"] = self._readable_by_the_sdk(resources)
        return trainer

    def _readable_by_the_sdk(self, resources: dict[str, Any]) -> dict[str, Any]:
        """Limits the Kubeflow SDK can tell no device from make it raise on every read of
        the TrainJob, and on every list of its namespace's jobs (kubeflow/sdk#516): add a
        cpu limit, the cpu request (else 1), as the runtime constructs do."""
        limits = resources.get("limits")
        if sdk_reads_limits(limits):
            return resources
        assert limits is not None
        cpu = resources.get("requests", {}).get("cpu", "1")
        note = (
            f"{self.node.path}: spec.trainer.resourcesPerNode had limits "
            f"({', '.join(sorted(limits))}) but no cpu or GPU: the Kubeflow SDK cannot read "
            f"such a TrainJob (kubeflow/sdk#516), so a cpu limit of {cpu} (its cpu request, "
            "else 1) was added"
        )
        limits["cpu"] = cpu
        self.sdk_notes.append(note)
        warnings.warn(note, RuntimeWarning, stacklevel=4)
        return resources
