"""What the typed job constructs share: common props, pod templates, NCCL/pool binding,
same-block placement, the escape hatch, and emitting a validated custom resource."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import constructs

from kubetrain.api import JobValidationError, RunPolicy, load_job
from kubetrain.api import keys as K
from kubetrain.api.base import DNS1035_PATTERN
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.loader import Job
from kubetrain.constructs.objects import api_object
from kubetrain.constructs.types import Image, Resources, check_dns_label, check_labels

JOB_NAME_LABEL = K.JOB_NAME
DEFAULT_TOPOLOGY_KEY = "topology.kubernetes.io/zone"


class NcclProfileLike(Protocol):
    """What a job needs from an NCCL fabric profile (``kubetrain.constructs.nccl``)."""

    @property
    def name(self) -> str: ...

    def apply(self, template: dict[str, Any], *, gpus_per_node: int) -> dict[str, Any]: ...


class NodePoolLike(Protocol):
    """What a job needs from a GPU node pool (``kubetrain.constructs.node_pool``)."""

    @property
    def gpus_per_node(self) -> int: ...

    @property
    def topology_key(self) -> str: ...

    def bind(
        self, template: dict[str, Any], *, gpus_per_node: int | None = None
    ) -> dict[str, Any]: ...


class LocalQueueLike(Protocol):
    """What a job needs from a Kueue LocalQueue (``kubetrain.constructs.queues``)."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...


class Placement(StrEnum):
    """Where a job's pods may land relative to each other."""

    ANY = "any"
    """No constraint."""
    SAME_BLOCK = "same-block"
    """Required pod affinity on the topology key: every pod in one block (rail, rack,
    IB island). The first pod picks the block."""
    PREFER_SAME_BLOCK = "prefer-same-block"
    """Preferred pod affinity on the topology key: same block when capacity allows."""


# (replica type, pod template) -> pod template; the escape hatch, applied last.
PodTemplatePatch = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class JobMetaProps:
    """Props every job construct has about the job object itself (a TrainJob's too)."""

    name: str | None = None
    """Job name. Default: the construct id, lowercased."""
    namespace: str = "default"
    """Namespace of the job."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the job (and on its pods, where the construct makes them). Default: none."""
    annotations: dict[str, str] = field(default_factory=dict)
    """Annotations on the job object. Default: none."""
    queue: str | LocalQueueLike | None = None
    """Kueue LocalQueue of the job's namespace (a ``LocalQueue`` or its name): the job
    gets the label ``kueue.x-k8s.io/queue-name``, so Kueue creates it suspended and starts
    it once its ClusterQueue admits it. Default: none (Kueue leaves the job alone, unless
    the namespace has a LocalQueue named ``default``: Kueue then labels it itself)."""
    workload_priority_class: str | None = None
    """Kueue WorkloadPriorityClass of the job (label ``kueue.x-k8s.io/priority-class``):
    its queueing and preemption priority. Default: none (Kueue takes the pods'
    PriorityClass, e.g. a node pool's)."""

    def __post_init__(self) -> None:
        if self.name is not None:
            _check_job_name(self.name)
        check_dns_label("namespace", self.namespace)
        self._check_queue()
        check_labels("labels", self.labels)

    def _check_queue(self) -> None:
        queue = self.queue
        foreign = (
            queue is not None
            and not isinstance(queue, str)
            and self.queue_in_namespace
            and queue.namespace != self.namespace
        )
        if foreign:
            assert queue is not None and not isinstance(queue, str)
            raise ValueError(
                f"queue ({queue.name!r}) is a LocalQueue of namespace {queue.namespace!r}, "
                f"but the job runs in {self.namespace!r}: a job can only use a LocalQueue "
                "of its own namespace"
            )
        for prop, key in (
            ("queue", K.KUEUE_QUEUE_NAME_LABEL),
            ("workload_priority_class", K.KUEUE_PRIORITY_CLASS_LABEL),
        ):
            value = self.queue_name if prop == "queue" else self.workload_priority_class
            if value is not None:
                check_labels(prop, {key: value})
                if not value:
                    raise ValueError(f"{prop} ('') must name a Kueue object, or be None")
        for key in (K.KUEUE_QUEUE_NAME_LABEL, K.KUEUE_PRIORITY_CLASS_LABEL):
            if key in self.labels:
                prop = "queue" if key == K.KUEUE_QUEUE_NAME_LABEL else "workload_priority_class"
                raise ValueError(
                    f"labels[{key!r}] ({self.labels[key]!r}) is set by hand: use {prop}=, "
                    "which also keeps the label off the pods"
                )

    @property
    def queue_in_namespace(self) -> bool:
        """Whether ``queue`` must be a LocalQueue of ``namespace`` (a job's must)."""
        return True

    @property
    def queue_name(self) -> str | None:
        """The LocalQueue's name (the label value), or None."""
        if self.queue is None or isinstance(self.queue, str):
            return self.queue
        return self.queue.name

    @property
    def kueue_labels(self) -> dict[str, str]:
        """The Kueue labels the job object carries."""
        out: dict[str, str] = {}
        if self.queue_name is not None:
            out[K.KUEUE_QUEUE_NAME_LABEL] = self.queue_name
        if self.workload_priority_class is not None:
            out[K.KUEUE_PRIORITY_CLASS_LABEL] = self.workload_priority_class
        return out


@dataclass(frozen=True, kw_only=True)
class JobProps(JobMetaProps):
    """Props every job construct with pod templates has (the job object's, and its pods')."""

    image: Image
    """The training image, pinned. Required."""
    command: tuple[str, ...] = ()
    """Container command. Default: the image's entrypoint."""
    args: tuple[str, ...] = ()
    """Container arguments. Default: none."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables (they win over a profile's). Default: none."""
    gpus_per_node: int | None = None
    """GPUs per pod (``nvidia.com/gpu`` limit). Default: the node pool's, else 0."""
    resources: Resources = field(default_factory=Resources)
    """CPU/memory per pod (GPUs come from ``gpus_per_node``). Default: none."""
    profile: NcclProfileLike | None = None
    """NCCL fabric profile (env, /dev/shm, capabilities, RDMA resources). Default: none,
    or the node pool's."""
    node_pool: NodePoolLike | None = None
    """GPU node pool to run on: its selector, tolerations, priority and profile."""
    placement: Placement = Placement.ANY
    """Pod placement within the topology (see :class:`Placement`)."""
    topology_key: str | None = None
    """Node label that names a block. Default: the node pool's, else the zone label."""
    run_policy: RunPolicy | None = None
    """Run policy (cleanup, TTL, deadline, backoff, scheduling, suspend). Default: none."""
    pod_labels: dict[str, str] = field(default_factory=dict)
    """Labels on the pods only, besides ``labels``. Default: none."""
    patch_pod_template: PodTemplatePatch | None = None
    """Escape hatch: called with (replica type, pod template), returns the template to
    use; the result is still validated against the pinned Kubernetes schema."""
    termination_grace_seconds: int | None = None
    """Seconds a stopped pod (drained, evicted, preempted, or deleted by a gang restart)
    gets between SIGTERM and SIGKILL: long enough to checkpoint (the sample trainers save
    the step they finished on SIGTERM). Default: Kubernetes' 30."""
    service_account_token: bool = False
    """Mount the ServiceAccount token into the pods. Default: no
    (``automountServiceAccountToken: false``): training code does not call the Kubernetes
    API, and a mounted token is a credential a compromised job could use."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_gpus(
            self.gpus_per_node, self.resources, "resources", "which also sets the process count"
        )
        if self.profile is not None and self.node_pool is not None:
            raise ValueError(
                f"profile ({self.profile.name}) and node_pool are both set: the node pool "
                "carries its own profile; set one of them"
            )
        if (
            self.node_pool is not None
            and self.gpus_per_node is not None
            and self.gpus_per_node > self.node_pool.gpus_per_node
        ):
            raise ValueError(
                f"gpus_per_node ({self.gpus_per_node}) exceeds the node pool's "
                f"{self.node_pool.gpus_per_node} GPUs per node"
            )
        check_labels("pod_labels", self.pod_labels)
        check_env_names(self.env)
        grace = self.termination_grace_seconds
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int) or grace < 0
        ):
            raise ValueError(
                f"termination_grace_seconds ({grace!r}) must be a whole number of seconds >= 0"
            )

    @property
    def gpus(self) -> int:
        """GPUs per pod after defaulting."""
        if self.gpus_per_node is not None:
            return self.gpus_per_node
        return self.node_pool.gpus_per_node if self.node_pool is not None else 0


def check_gpus(gpus_per_node: int | None, resources: Resources, prop: str, why: str) -> None:
    """GPUs are asked for with ``gpus_per_node`` (>= 0), never in ``<prop>.gpus``."""
    if gpus_per_node is not None and gpus_per_node < 0:
        raise ValueError(f"gpus_per_node ({gpus_per_node}) must be >= 0")
    if resources.gpus:
        raise ValueError(
            f"{prop}.gpus ({resources.gpus}) must not be set on a job: use gpus_per_node, {why}"
        )


def check_env_names(env: dict[str, str]) -> None:
    for key in env:
        if (
            not key
            or not (key[0].isalpha() or key[0] == "_")
            or not all(c.isalnum() or c in "_.-" for c in key)
        ):
            raise ValueError(f"env key ({key!r}) is not a valid environment variable name")


def _check_job_name(name: str) -> None:
    import re

    if not re.match(DNS1035_PATTERN, name) or len(name) > 63:
        raise ValueError(
            f"name ({name!r}) must be a DNS-1035 label: lowercase letters, digits and '-', "
            "starting with a letter, at most 63 characters"
        )


RESTART_POLICIES = ("OnFailure", "Always", "Never", "ExitCode")


def check_restart_policy(value: str) -> None:
    if value not in RESTART_POLICIES:
        raise ValueError(f"restart_policy ({value!r}) must be one of {', '.join(RESTART_POLICIES)}")


def job_name(props: JobMetaProps, construct_id: str) -> str:
    name = props.name or construct_id.lower()
    _check_job_name(name)
    return name


def pod_template(
    props: JobProps,
    *,
    name: str,
    replica_type: str,
    container: str,
    command: tuple[str, ...] | None = None,
    args: tuple[str, ...] | None = None,
    gpus: int | None = None,
    resources: Resources | None = None,
    bind_pool: bool = True,
    place: bool = True,
) -> dict[str, Any]:
    """A replica's PodTemplateSpec: one container, the profile/pool applied, placement
    (unless ``place`` is False: an MPI launcher need not share the workers' block), then
    the escape hatch."""
    gpu_count = props.gpus if gpus is None else gpus
    res = resources if resources is not None else props.resources
    wire_resources = Resources(
        cpu=res.cpu,
        memory=res.memory,
        cpu_limit=res.cpu_limit,
        memory_limit=res.memory_limit,
        gpus=gpu_count,
        extended=dict(res.extended),
    ).to_wire()
    main: dict[str, Any] = {"name": container, "image": str(props.image)}
    cmd = props.command if command is None else command
    arg = props.args if args is None else args
    if cmd:
        main["command"] = list(cmd)
    if arg:
        main["args"] = list(arg)
    if props.env:
        main["env"] = [{"name": k, "value": v} for k, v in sorted(props.env.items())]
    if wire_resources:
        main["resources"] = wire_resources
    template: dict[str, Any] = {
        "metadata": {
            "labels": {**props.labels, **props.pod_labels},
            # An injected sidecar never exits, so the pod (and the job) never completes.
            "annotations": {K.ISTIO_INJECT_ANNOTATION: "false"},
        },
        "spec": {"containers": [main]},
    }
    if not props.service_account_token:
        template["spec"]["automountServiceAccountToken"] = False
    if props.termination_grace_seconds is not None:
        template["spec"]["terminationGracePeriodSeconds"] = props.termination_grace_seconds
    if not template["metadata"]["labels"]:
        del template["metadata"]["labels"]
    if bind_pool and props.node_pool is not None:
        template = props.node_pool.bind(template, gpus_per_node=gpu_count)
    elif bind_pool and props.profile is not None:
        template = props.profile.apply(template, gpus_per_node=gpu_count)
    if place:
        template = _place(props, template, name)
    if props.patch_pod_template is not None:
        template = props.patch_pod_template(replica_type, copy.deepcopy(template))
        if not isinstance(template, dict):
            raise ValueError(
                f"patch_pod_template returned {type(template).__name__} for {replica_type}: "
                "it must return the (modified) pod template dict"
            )
    return template


def _place(props: JobProps, template: dict[str, Any], name: str) -> dict[str, Any]:
    if props.placement is Placement.ANY:
        return template
    key = props.topology_key or (
        props.node_pool.topology_key if props.node_pool is not None else DEFAULT_TOPOLOGY_KEY
    )
    term = {
        "labelSelector": {"matchLabels": {JOB_NAME_LABEL: name}},
        "topologyKey": key,
    }
    affinity = template["spec"].setdefault("affinity", {}).setdefault("podAffinity", {})
    if props.placement is Placement.SAME_BLOCK:
        affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
    else:
        affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": 100, "podAffinityTerm": term}
        )
    return template


def emit_job(scope: constructs.Construct, manifest: dict[str, Any]) -> Job:
    """Validate the job against the typed API (and the pinned pod schema), then add it
    as the construct's ``Resource``. Errors name the construct path and every field."""
    try:
        job = load_job(manifest, source=scope.node.path)
    except JobValidationError as exc:
        raise ValueError(str(exc)) from None
    api_object(scope, "Resource", job.to_wire())
    return job


def metadata(props: JobMetaProps, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": props.namespace}
    if props.labels or props.kueue_labels:
        meta["labels"] = {**props.labels, **props.kueue_labels}
    if props.annotations:
        meta["annotations"] = dict(props.annotations)
    return meta


def run_policy_wire(props: JobProps) -> dict[str, Any]:
    return props.run_policy.to_wire() if props.run_policy is not None else {}


def replica_spec(
    props: JobProps,
    info: KindInfo,
    *,
    name: str,
    replica_type: str,
    replicas: int,
    restart_policy: str,
    trains: bool = True,
) -> dict[str, Any]:
    """A replica spec of a Kubeflow v1 job: pods of the kind's main container. A replica
    that does not train (a parameter server) gets no GPU and no node pool binding."""
    return {
        "replicas": replicas,
        "restartPolicy": restart_policy,
        "template": pod_template(
            props,
            name=name,
            replica_type=replica_type,
            container=str(info.main_container),
            gpus=None if trains else 0,
            bind_pool=trains,
        ),
    }


def emit_v1_job(
    scope: constructs.Construct,
    info: KindInfo,
    props: JobProps,
    name: str,
    replica_specs: dict[str, Any],
) -> Job:
    """A Kubeflow v1 job of kind ``info`` with these replica specs and the props' run
    policy, validated by the typed API and added as the construct's ``Resource``."""
    spec: dict[str, Any] = {info.replica_specs_field: replica_specs}
    if props.run_policy is not None:
        spec["runPolicy"] = run_policy_wire(props)
    manifest = {
        "apiVersion": info.api_version,
        "kind": info.kind,
        "metadata": metadata(props, name),
        "spec": spec,
    }
    return emit_job(scope, manifest)
