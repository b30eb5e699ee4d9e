"""The steps every v1-job-to-TrainJob conversion takes, whatever the kind
(:mod:`kubetrain.api.convert.trainjob` decides per kind which it takes): a pod template's
fields into a runtime patch (manager ``kubetrain.dev/convert``), the main container's into
``spec.trainer``, and every field neither can hold into a note saying why
(:mod:`kubetrain.api.convert.report`). The reasons are :data:`WHY`, one table.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubetrain.api import keys, kinds
from kubetrain.api.base import KubeModel
from kubetrain.api.convert.report import Conversion
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.trainjob import ContainerPatch, PodSpecPatch

#: The runtime patch's owner (a TrainJob's ``runtimePatches`` are keyed by manager).
MANAGER = f"{keys.KUBETRAIN_PREFIX}/convert"
NODE_JOB, LAUNCHER_JOB = "node", "launcher"


def _aliases(model: type[KubeModel]) -> list[str]:
    return [str(f.alias) for f in model.model_fields.values()]  # the wire names


#: What Trainer v2.3.0's runtime patch may set: pod fields, and the container fields but env
#: (the ``node`` container's comes from ``spec.trainer`` only).
POD_PATCH_FIELDS = frozenset(_aliases(PodSpecPatch)) - {"containers", "initContainers"}
CONTAINER_PATCH_FIELDS = tuple(a for a in _aliases(ContainerPatch) if a not in ("name", "env"))
TRAINER_FIELDS = ("image", "command", "args", "env")

#: Why a field is not carried, or what to check (``{runtime}`` is the runtime's name).
WHY = {
    "patch-metadata": "a pod patch sets labels and annotations only",
    "patch-container": "a runtime patch cannot add a container",
    "patch-pod": "Trainer v2.3.0's pod patch has no such field: the runtime's template decides",
    "container": "neither spec.trainer nor a container patch has it: the runtime's decides",
    "ports": "a TrainJob's rendezvous is the runtime's (node 0, port 29500)",
    "container-name": "the trainer's container is named node (kubectl logs -c node)",
    "no-command": "none set: runtime {runtime}'s trainer command runs, else the image's",
    "reserved": "the runtime's framework sets it; a TrainJob may not",
    "restart": "the runtime's template decides (upstream's and kubetrain's: OnFailure)",
    "nodes": "a TrainJob's node 0 plays {leader}",
    "only-one-side": "only the {side}'s pods had it: every node's pod has it now",
    "differ": "the {first}'s value ({value}): a TrainJob runs one pod template on every node; "
    "{first} and {other} may differ in labels and annotations only (or convert by hand)",
    "nproc": "left to the runtime (torch: auto on GPU nodes, else the pod's CPUs); set a number",
    "elastic": "a TrainJob's elasticity is its runtime's (mlPolicy.torch.elasticPolicy: "
    "minNodes, maxNodes, metrics); the TrainJob keeps numNodes",
    "nodes-mpi": "the hostfile's hosts (Workers, and the launcher with runLauncherAsWorker)",
    "as-node-unknown": "numNodes counts the launcher if {runtime} has runLauncherAsNode: check",
    "as-node": "runtime {runtime} differs in runLauncherAsNode: same hosts, the launcher {ranks}",
    "slots": "numProcPerNode is at least 1",
    "launcher-resources": "the Worker's resourcesPerNode sizes the launcher (runLauncherAsNode)",
    "worker-image": "Trainer v2.3.0 sets the image on the launcher only: nodes run {runtime}'s",
    "worker-command": "the node pods run runtime {runtime}'s command (its sshd)",
    "worker-env": "spec.trainer.env reaches the launcher only; a patch may not set node's env",
    "ssh-mount": "runtime {runtime}'s mlPolicy.mpi.sshAuthMountPath ({mount}) decides",
    "mpi-implementation": "Trainer v2.3.0's MPI policy writes OpenMPI's hostfile only",
    "launcher-creation": "the runtime's dependsOn decides (known runtimes: once nodes are Ready)",
    "deadline": "counted from the start or the last resume",
    "managed-by": f"the default, {keys.MANAGED_BY_TRAINER}, which kubetrain's operator serves",
    "backoffLimit": "a TrainJob's is the runtime's trainer Job template's (batch/v1's: 6)",
    "ttlSecondsAfterFinished": "the runtime's JobSet ttlSecondsAfterFinished decides",
    "schedulingPolicy": "the runtime's podGroupPolicy decides gang scheduling; queue with Kueue",
    "cleanPodPolicy": "a TrainJob's pods are its JobSet's: kubetrain stops the active ones",
    "run-policy": "a TrainJob has no equivalent",
    "metadata": "the TrainJob is a new object",
    "default-runtime": "no runtime named: {runtime} is the {framework} default{others}",
    "unknown-runtime": "unknown: it must be a ClusterTrainingRuntime with mlPolicy.{framework}",
    "known-runtime": "runtime {runtime} (ClusterTrainingRuntime, mlPolicy {framework})",
}


@dataclass(frozen=True)
class KnownRuntime:
    """A runtime upstream Trainer v2.3.0 or kubetrain's stacks ship (a test checks them)."""

    framework: str
    run_launcher_as_node: bool = False
    ssh_auth_mount_path: str | None = None


def refuse(path: str, expected: str, value: Any, source: str) -> JobValidationError:
    return JobValidationError([FieldError(path, expected, value)], source)


def patch_path(rjob: str, rest: str) -> str:
    return f"spec.runtimePatches[{MANAGER}]..replicatedJobs[{rjob}].template.spec.template.{rest}"


def main_container(template: dict[str, Any], kind: str) -> tuple[int, dict[str, Any]]:
    """The main container (the kind's, else the first) and its index."""
    containers = (template.get("spec") or {}).get("containers") or [{}]
    wanted = kinds.KINDS[kind].main_container
    index = next((i for i, c in enumerate(containers) if c.get("name") == wanted), 0)
    return index, dict(containers[index])


def sorted_keys(value: Any) -> Any:
    """Keys sorted at every level: the same output whatever the input's key order."""
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    return [sorted_keys(v) for v in value] if isinstance(value, list) else value


class Converter:
    """One conversion under way: its notes, ``spec.trainer`` and the pod patches."""

    def __init__(self, conv: Conversion, runtime: str, known: KnownRuntime | None) -> None:
        self.conv, self.runtime, self.known = conv, runtime, known
        self.trainer: dict[str, Any] = {}
        self.patches: dict[str, dict[str, Any]] = {}

    def why(self, key: str, **values: Any) -> str:
        return WHY[key].format(runtime=self.runtime, **values)

    def drop(self, path: str, value: Any, key: str, **values: Any) -> None:
        self.conv.dropped(path, value, self.why(key, **values))

    def decide(self, path: str, target: str | None, value: Any, key: str, **values: Any) -> None:
        self.conv.decide(path, target, value, self.why(key, **values))

    def pod(self, template: dict[str, Any], path: str, rjob: str, main: int) -> None:
        """A v1 pod template's pod fields into the ``rjob`` patch; containers but ``main``."""
        patch = self.patches.setdefault(rjob, {})
        for key, value in sorted((template.get("metadata") or {}).items()):
            if key in ("labels", "annotations") and value:
                patch.setdefault("metadata", {}).setdefault(key, {}).update(value)
                self.conv.carried(f"{path}.metadata.{key}", patch_path(rjob, "metadata"))
            elif value:
                self.drop(f"{path}.metadata.{key}", value, "patch-metadata")
        for key, value in sorted((template.get("spec") or {}).items()):
            where = f"{path}.spec.{key}"
            if key in POD_PATCH_FIELDS:
                patch.setdefault("spec", {})[key] = copy.deepcopy(value)
                self.conv.carried(where, patch_path(rjob, f"spec.{key}"))
            elif key == "containers":
                for index, container in enumerate(value):
                    if index != main:
                        self.drop(f"{where}[{index}]", container.get("name"), "patch-container")
            elif key == "initContainers":
                self.drop(where, [c.get("name") for c in value], "patch-container")
            else:
                self.drop(where, value, "patch-pod")

    def container(self, container: dict[str, Any], path: str, rjob: str) -> None:
        """The main container's fields ``spec.trainer`` has not: patched or dropped."""
        fields = {k: copy.deepcopy(container[k]) for k in CONTAINER_PATCH_FIELDS if k in container}
        if fields:
            spec = self.patches.setdefault(rjob, {}).setdefault("spec", {})
            spec.setdefault("containers", []).append({"name": T.NODE, **fields})
        for key in fields:
            self.conv.carried(f"{path}.{key}", patch_path(rjob, f"spec.containers[node].{key}"))
        for key, value in sorted(container.items()):
            if key not in (*TRAINER_FIELDS, *CONTAINER_PATCH_FIELDS, "resources", "name"):
                self.drop(f"{path}.{key}", value, "ports" if key == "ports" else "container")
        if container.get("name") != T.NODE:
            self.decide(f"{path}.name", T.NODE, container.get("name"), "container-name")

    def to_trainer(self, container: dict[str, Any], path: str) -> None:
        for key in TRAINER_FIELDS:
            if key == "env":
                self.env(container.get("env") or [], f"{path}.env")
            elif key in container:
                self.trainer[key] = copy.deepcopy(container[key])
                self.conv.carried(f"{path}.{key}", f"spec.trainer.{key}")
        if "command" not in container:
            self.decide(f"{path}.command", "spec.trainer.command", None, "no-command")

    def env(self, env: list[dict[str, Any]], path: str) -> None:
        kept = []
        for index, var in enumerate(env):
            if var.get("name") in T.ALL_RESERVED_ENV:
                self.drop(f"{path}[{index}]", var, "reserved")
            else:
                kept.append(copy.deepcopy(var))
        if kept:
            self.trainer["env"] = kept
            self.conv.carried(path, "spec.trainer.env")

    def resources(self, container: dict[str, Any], path: str) -> None:
        if "resources" in container:
            self.trainer["resourcesPerNode"] = copy.deepcopy(container["resources"])
            self.conv.carried(f"{path}.resources", "spec.trainer.resourcesPerNode")

    def replica_policy(self, replica: dict[str, Any], path: str) -> None:
        for key, value in sorted(replica.items()):
            if key == "restartPolicy" and value == "OnFailure":
                self.decide(f"{path}.{key}", None, value, "restart")
            elif key not in ("replicas", "template"):
                self.drop(f"{path}.{key}", value, "restart")
