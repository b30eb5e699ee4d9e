"""``NcclProfile``: one NCCL fabric profile, a typed value built with a factory per fabric
(:meth:`NcclProfile.tcp`, :meth:`~NcclProfile.infiniband`, :meth:`~NcclProfile.roce`,
:meth:`~NcclProfile.efa`, :meth:`~NcclProfile.gcp_tcpx`, :meth:`~NcclProfile.gcp_tcpxo`, each
defined in its fabric's module). It carries the environment, pod settings (``/dev/shm``
size, capabilities, RDMA/EFA resources, hugepages, host network, platform sidecars), node
selectors and tolerations, and :meth:`NcclProfile.apply` patches a pod template with them.

Generic profiles (tcp, infiniband, roce, efa) never set the variables NCCL documents as
debugging knobs (:data:`~kubetrain.constructs.nccl.common.DEBUGGING_KNOBS`); the GKE
profiles set the ones Google's guides set. ``overrides`` is the explicit escape hatch for
everything else: its values win over the profile's, and it may set the debugging knobs.
Setting them in production is what NCCL warns against ("may result in sub-optimal
behavior, crashes, or hangs").
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec

from kubetrain.constructs.nccl import efa as _efa
from kubetrain.constructs.nccl import gcp as _gcp
from kubetrain.constructs.nccl import infiniband as _infiniband
from kubetrain.constructs.nccl import tcp as _tcp
from kubetrain.constructs.nccl.common import (
    DEBUGGING_KNOBS,
    DEFAULT_SHM,
    ENV_NAME,
    GENERIC_PROFILES,
    GPU_RESOURCE,
    HOST_NETWORK_DNS_POLICY,
    HUGEPAGES_RESOURCE,
    ISTIO_INJECT,
    PROFILE_NAMES,
    RESOURCE_NAME,
    SHM_PATH,
    SHM_VOLUME,
    ProfileFields,
    add_capabilities,
    add_env,
    add_mount,
    add_unique,
    check_range,
    check_shm,
)
from kubetrain.constructs.types import Quantity

_Options = ParamSpec("_Options")


def _factory(fabric: Callable[_Options, ProfileFields]) -> Callable[_Options, NcclProfile]:
    """The ``NcclProfile`` factory of a fabric module's function: the same options (and
    documentation), the profile built from the fields the function derives."""

    @functools.wraps(fabric)
    def build(*args: _Options.args, **kwargs: _Options.kwargs) -> NcclProfile:
        return NcclProfile(**fabric(*args, **kwargs))

    # What help() and inspect show: the fabric's options, returning the profile.
    build.__signature__ = inspect.signature(fabric).replace(  # type: ignore[attr-defined]
        return_annotation="NcclProfile"
    )
    return build


@dataclass(frozen=True, kw_only=True)
class NcclProfile:
    """One NCCL fabric profile. Build it with a factory (``NcclProfile.infiniband(...)``);
    the fields are what the factory derived, and :meth:`apply` puts them on a pod."""

    name: str
    """The profile kind: tcp, infiniband, roce, efa, gcp-tcpx or gcp-tcpxo."""
    settings: Mapping[str, str]
    """Variables the profile itself sets (before ``overrides``)."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """Explicit escape hatch: variables that win over ``settings``; may set the
    debugging knobs. Default: none."""
    shm_size: Quantity = DEFAULT_SHM
    """``sizeLimit`` of the memory-backed ``/dev/shm``. Default: :data:`DEFAULT_SHM`."""
    capabilities: tuple[str, ...] = ()
    """Capabilities added to every container. Default: none."""
    resources: Mapping[str, int | str] = field(default_factory=dict)
    """Per-pod resources added to the main container (requests = limits). Default: none."""
    host_network: bool = False
    """Run pods in the host network namespace (with ``dnsPolicy:
    ClusterFirstWithHostNet``). Default: pod network."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Node labels the fabric needs. Default: none."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """Tolerations the fabric's nodes need. Default: none."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Pod annotations the platform needs (besides ``sidecar.istio.io/inject``)."""
    volumes: tuple[Mapping[str, Any], ...] = ()
    """Pod volumes the platform needs (besides ``/dev/shm``). Default: none."""
    volume_mounts: tuple[Mapping[str, Any], ...] = ()
    """Mounts of those volumes in every main container. Default: none."""
    sidecars: tuple[Mapping[str, Any], ...] = ()
    """Native sidecars (init containers with ``restartPolicy: Always``). Default: none."""
    required_gpus: int | None = None
    """GPUs a pod must take for the fabric to work (A3 machines: all 8). Default: any."""
    expected_network: str | None = None
    """Name NCCL logs in ``Using network <name>`` when this fabric works (checked by
    the node pool's preflight). Default: not checked."""

    def __post_init__(self) -> None:
        if self.name not in PROFILE_NAMES:
            raise ValueError(
                f"name ({self.name!r}) must be one of {', '.join(PROFILE_NAMES)}: build "
                "profiles with the NcclProfile factories"
            )
        for prop, env in (("settings", self.settings), ("overrides", self.overrides)):
            for key, value in env.items():
                if not isinstance(key, str) or not ENV_NAME.match(key):
                    raise ValueError(
                        f"{prop} key ({key!r}) is not an environment variable name: use "
                        "letters, digits and '_', not starting with a digit"
                    )
                if not isinstance(value, str) or "\x00" in value:
                    raise ValueError(f"{prop}[{key!r}] ({value!r}) must be a string")
        knobs = sorted(DEBUGGING_KNOBS & set(self.settings))
        if self.name in GENERIC_PROFILES and knobs:
            raise ValueError(
                f"settings ({', '.join(knobs)}) of the generic {self.name} profile set "
                "NCCL debugging knobs: set them through overrides, knowing NCCL warns "
                "against keeping them in production"
            )
        check_shm(self.shm_size)
        for cap in self.capabilities:
            if not re.match(r"^[A-Z_]+$", cap):
                raise ValueError(f"capabilities ({cap!r}) must be a name such as 'IPC_LOCK'")
        for resource in self.resources:
            if not RESOURCE_NAME.match(resource) and not resource.startswith("hugepages-"):
                raise ValueError(f"resources key ({resource!r}) is not a resource name")
        check_range("required_gpus", self.required_gpus, 1, 64)

    # --- derived views ---------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Every variable the profile puts on a container, ``overrides`` applied, sorted."""
        merged = {**self.settings, **self.overrides}
        return dict(sorted(merged.items()))

    @property
    def debugging_knobs(self) -> tuple[str, ...]:
        """The debugging knobs this profile sets (via the platform guide or overrides)."""
        return tuple(sorted(DEBUGGING_KNOBS & set(self.env)))

    @property
    def requires_peermem(self) -> bool:
        """Whether GPUDirect RDMA on this fabric goes through ``nvidia-peermem``."""
        return self.name in ("infiniband", "roce")

    # --- factories: one module per fabric derives the fields, each default stated there

    tcp = staticmethod(_factory(_tcp.tcp))
    infiniband = staticmethod(_factory(_infiniband.infiniband))
    roce = staticmethod(_factory(_infiniband.roce))
    efa = staticmethod(_factory(_efa.efa))
    gcp_tcpx = staticmethod(_factory(_gcp.gcp_tcpx))
    gcp_tcpxo = staticmethod(_factory(_gcp.gcp_tcpxo))

    # --- applying ------------------------------------------------------------------

    def apply(self, template: Mapping[str, Any], *, gpus_per_node: int) -> dict[str, Any]:
        """A patched deep copy of a PodTemplateSpec dict.

        Every container gets the profile's variables (a variable the container already
        sets keeps its value). With ``gpus_per_node == 0`` (a pod without GPUs, such as
        an MPI launcher) that and the ``sidecar.istio.io/inject: "false"`` annotation
        are all. A GPU pod also gets: the fabric's node selector and tolerations, a
        memory-backed ``/dev/shm`` with ``sizeLimit`` in every container that does not
        mount one, the capabilities in every container, ``nvidia.com/gpu`` (when not
        set) and the fabric's resources on the first container (requests = limits),
        host network with ``dnsPolicy: ClusterFirstWithHostNet`` when the fabric uses
        it, and the platform's volumes, mounts, annotations and native sidecars.
        Settings the template already has are kept.
        """
        if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int):
            raise ValueError(f"gpus_per_node ({gpus_per_node!r}) must be an integer")
        if gpus_per_node < 0:
            raise ValueError(f"gpus_per_node ({gpus_per_node}) must be >= 0")
        if self.required_gpus and gpus_per_node not in (0, self.required_gpus):
            raise ValueError(
                f"gpus_per_node ({gpus_per_node}) must be {self.required_gpus} for the "
                f"{self.name} profile: the fabric's daemon and NICs serve a whole node"
            )
        out: dict[str, Any] = copy.deepcopy(dict(template))
        spec = out.setdefault("spec", {})
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise ValueError(
                "template.spec.containers (empty) must hold at least one container to "
                f"apply the {self.name} profile to"
            )
        annotations = out.setdefault("metadata", {}).setdefault("annotations", {})
        annotations.setdefault(ISTIO_INJECT, "false")
        env = self.env
        for container in containers:
            add_env(container, env)
        if gpus_per_node == 0:
            return out
        for key, value in self.annotations.items():
            annotations.setdefault(key, value)
        selector = spec.setdefault("nodeSelector", {})
        for key, value in self.node_selector.items():
            selector.setdefault(key, value)
        if not selector:
            del spec["nodeSelector"]
        for toleration in self.tolerations:
            add_unique(spec, "tolerations", dict(toleration))
        self._add_shm(spec, containers)
        for container in containers:
            for mount in self.volume_mounts:
                add_mount(container, mount)
            add_capabilities(container, self.capabilities)
        for volume in self.volumes:
            if not any(v.get("name") == volume["name"] for v in spec.get("volumes", [])):
                spec.setdefault("volumes", []).append(copy.deepcopy(dict(volume)))
        self._add_resources(containers[0], gpus_per_node)
        if self.host_network:
            spec["hostNetwork"] = True
            if spec.get("dnsPolicy", "ClusterFirst") == "ClusterFirst":
                spec["dnsPolicy"] = HOST_NETWORK_DNS_POLICY
        names = {c.get("name") for c in containers + spec.get("initContainers", [])}
        for sidecar in self.sidecars:
            if sidecar["name"] not in names:
                spec.setdefault("initContainers", []).append(copy.deepcopy(dict(sidecar)))
        return out

    def _add_shm(self, spec: dict[str, Any], containers: list[dict[str, Any]]) -> None:
        wanting = [
            c
            for c in containers
            if not any(m.get("mountPath") == SHM_PATH for m in c.get("volumeMounts", []))
        ]
        if not wanting:
            return
        volumes = spec.setdefault("volumes", [])
        if not any(v.get("name") == SHM_VOLUME for v in volumes):
            volumes.append(
                {
                    "name": SHM_VOLUME,
                    "emptyDir": {"medium": "Memory", "sizeLimit": str(self.shm_size)},
                }
            )
        for container in wanting:
            container.setdefault("volumeMounts", []).append(
                {"name": SHM_VOLUME, "mountPath": SHM_PATH}
            )

    def _add_resources(self, container: dict[str, Any], gpus_per_node: int) -> None:
        resources = container.setdefault("resources", {})
        limits = resources.setdefault("limits", {})
        requests = resources.get("requests", {})
        wanted: dict[str, int | str] = {GPU_RESOURCE: gpus_per_node, **self.resources}
        for name, amount in wanted.items():
            if name in limits or name in requests:
                continue
            limits[name] = amount
            if name != GPU_RESOURCE:
                resources.setdefault("requests", {})[name] = amount
        has_hugepages = any(k.startswith("hugepages-") for k in {**limits, **requests})
        has_cpu_or_memory = any(
            k in ("cpu", "memory") for k in {**limits, **resources.get("requests", {})}
        )
        if has_hugepages and not has_cpu_or_memory:
            raise ValueError(
                f"container {container.get('name')!r} gets {HUGEPAGES_RESOURCE} from the "
                f"{self.name} profile but has no cpu or memory request or limit, which "
                "Kubernetes requires alongside hugepages: give it resources (e.g. a memory "
                "request)"
            )
