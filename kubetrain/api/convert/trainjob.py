"""Kubeflow v1 jobs to Trainer v2 TrainJobs, as upstream's migration guide maps them, completed
from Trainer v2.3.0's API and runtimes: ``spec.trainer`` takes the main container's image,
command, args, env and resources, the node count and processes per node; a runtime patch
(manager ``kubetrain.dev/convert``) what Trainer's pod patch may set; every other field is a
note (:mod:`kubetrain.api.convert.report`). TFJobs, and PyTorchJobs whose Master and Worker
pods differ beyond labels and annotations (a TrainJob runs one template), are refused.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubetrain.api import keys, kinds
from kubetrain.api.base import KubeModel
from kubetrain.api.convert.report import Conversion
from kubetrain.api.errors import FieldError, JobValidationError, render_value
from kubetrain.api.loader import load_job
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.loader import load_trainer_object
from kubetrain.api.trainer.trainjob import ContainerPatch, PodSpecPatch

#: The runtime patch's owner (a TrainJob's ``runtimePatches`` are keyed by manager).
MANAGER = f"{keys.KUBETRAIN_PREFIX}/convert"
NODE_JOB, LAUNCHER_JOB = "node", "launcher"
PYTORCH, MPI = kinds.PYTORCH.kind, kinds.MPI.kind
TORCH, MPI_POLICY = "torch", "mpi"


def _aliases(model: type[KubeModel]) -> list[str]:
    return [str(f.alias) for f in model.model_fields.values()]  # the wire names


@dataclass(frozen=True)
class KnownRuntime:
    """A runtime upstream Trainer v2.3.0 or kubetrain's stacks ship (a test checks them)."""

    framework: str
    run_launcher_as_node: bool = False
    ssh_auth_mount_path: str | None = None


MPIUSER_SSH = "/home/mpiuser/.ssh"
KNOWN_RUNTIMES: dict[str, KnownRuntime] = {
    "torch-distributed": KnownRuntime(TORCH),
    "torch-ddp-sample": KnownRuntime(TORCH),
    "torch-h100-ib": KnownRuntime(TORCH),
    "torch-p5-efa": KnownRuntime(TORCH),
    "torch-a3-mega": KnownRuntime(TORCH),
    "deepspeed-distributed": KnownRuntime(MPI_POLICY, True, MPIUSER_SSH),
    "mlx-distributed": KnownRuntime(MPI_POLICY, True, MPIUSER_SSH),
    "horovod-distributed": KnownRuntime(MPI_POLICY, True, T.DEFAULT_SSH_AUTH_MOUNT_PATH),
    "jax-distributed": KnownRuntime("jax"),
    "xgboost-distributed": KnownRuntime("xgboost"),
    "tensorflow-distributed": KnownRuntime("tensorflow"),
}
#: Per kind: its runtimes' ML policy and the default runtime. No generic MPI runtime ships
#: since Trainer v2.1 (v2.0's ``mpi-distributed`` is gone): ``deepspeed-distributed`` is
#: the MPI runtime both upstream and kubetrain's stacks ship.
FRAMEWORK = {PYTORCH: TORCH, MPI: MPI_POLICY}
DEFAULT_RUNTIME = {PYTORCH: "torch-distributed", MPI: "deepspeed-distributed"}

#: What Trainer v2.3.0's runtime patch may set: pod fields, and the container fields but env
#: (the ``node`` container's comes from ``spec.trainer`` only).
POD_PATCH_FIELDS = frozenset(_aliases(PodSpecPatch)) - {"containers", "initContainers"}
CONTAINER_PATCH_FIELDS = tuple(a for a in _aliases(ContainerPatch) if a not in ("name", "env"))
TRAINER_FIELDS = ("image", "command", "args", "env")
#: Metadata the API server writes: not the user's to carry.
SERVER_METADATA = {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

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
    "nodes-torch": "a TrainJob's node 0 plays the Master",
    "only-one-side": "only the {side}'s pods had it: every node's pod has it now",
    "differ": "the Master's value ({master}): a TrainJob runs one pod template on every node; "
    "Master and Worker may differ in labels and annotations only (or convert by hand)",
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
    "tfjob": "(Trainer v2 has no TensorFlow runtime: its ML policies are torch, MPI, JAX, "
    "XGBoost and Flux); keep the TFJob, which kubetrain serves",
    "default-runtime": "no runtime named: {runtime} is the {framework} default; or: {others}",
    "unknown-runtime": "unknown: it must be a ClusterTrainingRuntime with mlPolicy.{framework}",
    "known-runtime": "runtime {runtime} (ClusterTrainingRuntime, mlPolicy {framework})",
}


def _refuse(path: str, expected: str, value: Any, source: str) -> JobValidationError:
    return JobValidationError([FieldError(path, expected, value)], source)


def _patch_path(rjob: str, rest: str) -> str:
    return f"spec.runtimePatches[{MANAGER}]..replicatedJobs[{rjob}].template.spec.template.{rest}"


def _main(template: dict[str, Any], kind: str) -> tuple[int, dict[str, Any]]:
    """The main container (the kind's, else the first) and its index."""
    containers = (template.get("spec") or {}).get("containers") or [{}]
    wanted = kinds.KINDS[kind].main_container
    index = next((i for i, c in enumerate(containers) if c.get("name") == wanted), 0)
    return index, dict(containers[index])


class _Converter:
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
                self.conv.carried(f"{path}.metadata.{key}", _patch_path(rjob, "metadata"))
            elif value:
                self.drop(f"{path}.metadata.{key}", value, "patch-metadata")
        for key, value in sorted((template.get("spec") or {}).items()):
            where = f"{path}.spec.{key}"
            if key in POD_PATCH_FIELDS:
                patch.setdefault("spec", {})[key] = copy.deepcopy(value)
                self.conv.carried(where, _patch_path(rjob, f"spec.{key}"))
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
            self.conv.carried(f"{path}.{key}", _patch_path(rjob, f"spec.containers[node].{key}"))
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


def _sorted(value: Any) -> Any:
    """Keys sorted at every level: the same output whatever the input's key order."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    return [_sorted(v) for v in value] if isinstance(value, list) else value


def _first_difference(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        pairs = [(a.get(k), b.get(k), f"{path}.{k}") for k in sorted(a.keys() | b.keys())]
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = [(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))]
    else:
        return None if a == b else (path, a, b)
    return next((d for x, y, p in pairs if (d := _first_difference(x, y, p))), None)


def _one_template(
    c: _Converter, master: dict[str, Any], worker: dict[str, Any], source: str
) -> dict[str, Any]:
    """The Master's and the Worker's templates as one (labels and annotations merged)."""
    base = "spec.pytorchReplicaSpecs"
    diff = _first_difference(master.get("spec"), worker.get("spec"), f"{base}.Worker.template.spec")
    metadata = {**(worker.get("metadata") or {}), **(master.get("metadata") or {})}
    for key in ("labels", "annotations"):
        m, w = (((t.get("metadata") or {}).get(key) or {}) for t in (master, worker))
        clash = next((k for k in sorted(m.keys() & w.keys()) if m[k] != w[k]), None)
        if clash is not None and diff is None:
            diff = (f"{base}.Worker.template.metadata.{key}.{clash}", m[clash], w[clash])
        for side, mine, other in (("Master", m, w), ("Worker", w, m)):
            for k in sorted(mine.keys() - other.keys()):
                where = f"{base}.{side}.template.metadata.{key}.{k}"
                c.decide(where, None, mine[k], "only-one-side", side=side)
        metadata[key] = {**w, **m}
    if diff is not None:
        raise _refuse(diff[0], c.why("differ", master=render_value(diff[1])), diff[2], source)
    return {"metadata": metadata, "spec": master.get("spec")}


def _pytorch(c: _Converter, spec: dict[str, Any], source: str) -> None:
    replicas = spec.get("pytorchReplicaSpecs") or {}
    base = "spec.pytorchReplicaSpecs"
    present = [t for t in ("Master", "Worker") if t in replicas]
    templates = [replicas[t].get("template") or {} for t in present]
    template = templates[0]
    if len(templates) == 2:
        template = _one_template(c, templates[0], templates[1], source)
    nodes = sum(int(replicas[t].get("replicas", 1)) for t in present)
    c.trainer["numNodes"] = nodes
    counted = " + ".join(f"{base}.{t}.replicas" for t in present)
    c.conv.carried(counted, "spec.trainer.numNodes", c.why("nodes-torch"), nodes)
    for t in present:
        c.replica_policy(replicas[t], f"{base}.{t}")
    path = f"{base}.{present[0]}.template"
    main, container = _main(template, PYTORCH)
    c.pod(template, path, NODE_JOB, main)
    cpath = f"{path}.spec.containers[{main}]"
    c.to_trainer(container, cpath)
    c.resources(container, cpath)
    c.container(container, cpath, NODE_JOB)
    path, value = "spec.nprocPerNode", spec.get("nprocPerNode")
    elastic = spec.get("elasticPolicy") or {}
    if value is None and elastic.get("nProcPerNode") is not None:
        path, value = "spec.elasticPolicy.nProcPerNode", str(elastic["nProcPerNode"])
    if value is not None and value.isdigit():
        c.trainer["numProcPerNode"] = int(value)
        c.conv.carried(path, "spec.trainer.numProcPerNode", value=value)
    else:
        c.decide(path, "spec.trainer.numProcPerNode", value or "auto", "nproc")
    for key, value in sorted(elastic.items()):
        if key != "nProcPerNode":
            c.drop(f"spec.elasticPolicy.{key}", value, "elastic")


def _mpi(c: _Converter, spec: dict[str, Any]) -> None:
    replicas = spec.get("mpiReplicaSpecs") or {}
    base = "spec.mpiReplicaSpecs"
    launcher_hosts = bool(spec.get("runLauncherAsWorker", False))
    workers = int(replicas["Worker"].get("replicas", 1)) if "Worker" in replicas else 0
    hosts = workers + int(launcher_hosts)
    c.trainer["numNodes"] = hosts
    c.conv.carried(f"{base}.Worker.replicas", "spec.trainer.numNodes", c.why("nodes-mpi"), hosts)
    as_node = c.known.run_launcher_as_node if c.known else None
    if as_node is None:
        c.decide("spec.runLauncherAsWorker", None, launcher_hosts, "as-node-unknown")
    elif as_node != launcher_hosts:
        ranks = "hosts ranks too" if as_node else "hosts none"
        c.decide("spec.runLauncherAsWorker", None, launcher_hosts, "as-node", ranks=ranks)
    slots = spec.get("slotsPerWorker", 1)
    if slots >= 1:
        c.trainer["numProcPerNode"] = slots
        c.conv.carried("spec.slotsPerWorker", "spec.trainer.numProcPerNode", value=slots)
    else:
        c.drop("spec.slotsPerWorker", slots, "slots")
    worker = (replicas.get("Worker") or {}).get("template") or {}
    for rtype, rjob in (("Launcher", LAUNCHER_JOB), ("Worker", NODE_JOB)):
        if rtype not in replicas:
            continue
        c.replica_policy(replicas[rtype], f"{base}.{rtype}")
        template = replicas[rtype].get("template") or {}
        main, container = _main(template, MPI)
        c.pod(template, f"{base}.{rtype}.template", rjob, main)
        cpath = f"{base}.{rtype}.template.spec.containers[{main}]"
        c.container(container, cpath, rjob)
        if rjob == LAUNCHER_JOB:
            c.to_trainer(container, cpath)
            worker_resources = _main(worker, MPI)[1].get("resources")
            if not worker or container.get("resources") == worker_resources:
                c.resources(container, cpath)
            elif "resources" in container:
                c.drop(f"{cpath}.resources", container["resources"], "launcher-resources")
            continue
        c.resources(container, cpath)
        _mpi_worker(c, container, cpath)
    _mpi_policies(c, spec)


def _mpi_worker(c: _Converter, container: dict[str, Any], path: str) -> None:
    image = container.get("image")
    if image is not None and image == c.trainer.get("image"):
        c.decide(f"{path}.image", "spec.trainer.image", image, "worker-image")
    elif image is not None:
        c.drop(f"{path}.image", image, "worker-image")
    for key in ("command", "args"):
        if key in container:
            c.decide(f"{path}.{key}", None, container[key], "worker-command")
    for index, var in enumerate(container.get("env") or []):
        c.drop(f"{path}.env[{index}]", var, "worker-env")


def _mpi_policies(c: _Converter, spec: dict[str, Any]) -> None:
    mount = spec.get("sshAuthMountPath")
    known_mount = c.known.ssh_auth_mount_path if c.known else None
    if mount is not None and mount != known_mount:
        if known_mount is None:
            c.decide("spec.sshAuthMountPath", None, mount, "ssh-mount", mount="unknown")
        else:
            c.drop("spec.sshAuthMountPath", mount, "ssh-mount", mount=known_mount)
    if (implementation := spec.get("mpiImplementation")) not in (None, "OpenMPI"):
        c.drop("spec.mpiImplementation", implementation, "mpi-implementation")
    if (creation := spec.get("launcherCreationPolicy")) is not None:
        c.decide("spec.launcherCreationPolicy", None, creation, "launcher-creation")


def _run_policy(c: _Converter, spec: dict[str, Any], out: dict[str, Any]) -> None:
    for key, value in sorted((spec.get("runPolicy") or {}).items()):
        path = f"spec.runPolicy.{key}"
        if key == "suspend":
            out["suspend"] = value
            c.conv.carried(path, "spec.suspend", value=value)
        elif key == "activeDeadlineSeconds" and value >= 1:
            out["activeDeadlineSeconds"] = value
            c.conv.carried(path, "spec.activeDeadlineSeconds", c.why("deadline"), value)
        elif key == "managedBy" and value == keys.MANAGED_BY_MULTIKUEUE:
            out["managedBy"] = value
            c.conv.carried(path, "spec.managedBy", value=value)
        elif key == "managedBy" and value in keys.MANAGED_BY_VALUES:
            c.conv.carried(path, "spec.managedBy", c.why("managed-by"), value)
        else:
            c.drop(path, value, key if key in WHY else "run-policy")


def _metadata(c: _Converter, meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sorted(meta.items()):
        if key == "annotations":
            value = {k: v for k, v in value.items() if k != LAST_APPLIED}
        if key in SERVER_METADATA or not value:
            continue
        if key in ("name", "generateName", "namespace", "labels", "annotations"):
            out[key] = copy.deepcopy(value)
            c.conv.carried(f"metadata.{key}", f"metadata.{key}")
        else:
            c.drop(f"metadata.{key}", value, "metadata")
    return out


def _runtime(kind: str, runtime: str | None, conv: Conversion, source: str) -> tuple[str, Any]:
    framework = FRAMEWORK[kind]
    fits = sorted(n for n, r in KNOWN_RUNTIMES.items() if r.framework == framework)
    name = runtime or DEFAULT_RUNTIME[kind]
    known = KNOWN_RUNTIMES.get(name)
    what = {"runtime": name, "framework": framework}
    target = "spec.runtimeRef.name"
    if runtime is None:
        others = ", ".join(n for n in fits if n != name)
        conv.decide("kind", target, kind, WHY["default-runtime"].format(**what, others=others))
    elif known is not None and known.framework != framework:
        expected = f"a {framework} runtime for a {kind} ({', '.join(fits)}); {name} is a "
        raise _refuse(target, f"{expected}{known.framework} runtime", name, source)
    elif known is None:
        conv.decide("kind", target, name, WHY["unknown-runtime"].format(**what))
    else:
        conv.carried("kind", target, WHY["known-runtime"].format(**what), kind)
    return name, known


def to_trainjob(wire: dict[str, Any], *, runtime: str | None, source: str = "") -> Conversion:
    """A PyTorchJob or MPIJob (wire form) as a TrainJob on ClusterTrainingRuntime ``runtime``
    (None: the framework's default), with its notes; JobValidationError for a job that is
    invalid or cannot become a TrainJob."""
    kind = wire.get("kind") if isinstance(wire, dict) else None
    if kind not in FRAMEWORK:
        why = WHY["tfjob"] if kind == kinds.TENSORFLOW.kind else "to convert to a TrainJob"
        raise _refuse("kind", f"a {PYTORCH} or an {MPI} {why}", kind, source)
    job = load_job(wire, source).to_wire()
    conv = Conversion(output={}, source=source)
    name, known = _runtime(kind, runtime, conv, source)
    c = _Converter(conv, name, known)
    metadata = _metadata(c, job.get("metadata") or {})
    spec = job.get("spec") or {}
    if kind == PYTORCH:
        _pytorch(c, spec, source)
    else:
        _mpi(c, spec)
    ref = {"name": name, "kind": T.CLUSTER_TRAINING_RUNTIME}
    out: dict[str, Any] = {"runtimeRef": ref, "trainer": c.trainer}
    jobs = [{"name": j, "template": {"spec": {"template": p}}} for j, p in c.patches.items() if p]
    if jobs:
        patch = {"template": {"spec": {"replicatedJobs": jobs}}}
        out["runtimePatches"] = [{"manager": MANAGER, "trainingRuntimeSpec": patch}]
    _run_policy(c, spec, out)
    head = {"apiVersion": T.API_VERSION, "kind": T.TRAINJOB}
    conv.output = {**head, "metadata": _sorted(metadata), "spec": _sorted(out)}
    load_trainer_object(conv.output, source)  # the output must be a valid TrainJob
    return conv
