"""Kubeflow v1 jobs to Trainer v2 TrainJobs, as upstream's migration guide maps them, completed
from Trainer v2.3.0's API and runtimes: ``spec.trainer`` takes the main container's image,
command, args, env and resources, the node count and processes per node; a runtime patch
(manager ``kubetrain.dev/convert``) what Trainer's pod patch may set; every other field is a
note (:mod:`kubetrain.api.convert.report`; the steps every kind shares are
:mod:`~kubetrain.api.convert.trainjob_moves`).

:data:`TO_TRAINJOB` lists the kinds converted: those whose framework has a TrainJob ML policy
(PyTorchJob, MPIJob, JAXJob, XGBoostJob). A PyTorchJob's, JAXJob's or XGBoostJob's every
replica becomes a node, in start order (node 0 plays the Master, or Worker 0), all from one
pod template: one whose replica types' pods differ beyond labels and annotations is
refused. TFJobs and PaddleJobs are refused, saying why (:data:`NOT_TO_TRAINJOB`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api import keys, kinds
from kubetrain.api.convert.moves import refuse
from kubetrain.api.convert.report import Conversion
from kubetrain.api.convert.trainjob_moves import (
    LAUNCHER_JOB,
    MANAGER,
    NODE_JOB,
    WHY,
    Converter,
    KnownRuntime,
    main_container,
    sorted_keys,
)
from kubetrain.api.errors import render_value
from kubetrain.api.jax import INFO as JAX_INFO
from kubetrain.api.loader import load_job
from kubetrain.api.paddle import INFO as PADDLE_INFO
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.loader import load_trainer_object
from kubetrain.api.xgboost import INFO as XGBOOST_INFO

__all__ = ["KNOWN_RUNTIMES", "MANAGER", "NOT_TO_TRAINJOB", "TO_TRAINJOB", "to_trainjob"]

PYTORCH, MPI, TENSORFLOW = kinds.PYTORCH.kind, kinds.MPI.kind, kinds.TENSORFLOW.kind
JAX, XGBOOST, PADDLE = JAX_INFO.kind, XGBOOST_INFO.kind, PADDLE_INFO.kind
TORCH, MPI_POLICY = "torch", "mpi"
MASTER = "Master"

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


@dataclass(frozen=True)
class ProgramEnv:
    """What the program of a converted job reads: the variables the TrainJob's ML policy
    sets, in place of those the v1 kind's operator set (a test compares both with the pods
    each makes)."""

    reads: tuple[str, ...]
    instead_of: tuple[str, ...]
    how: str

    def message(self) -> str:
        reads, instead_of = ", ".join(self.reads), ", ".join(self.instead_of)
        return f"the program reads {reads} ({self.how}), not {instead_of}"


@dataclass(frozen=True)
class TrainJobKind:
    """How a v1 kind becomes a TrainJob: its runtimes' ML policy, the runtime named when none
    is asked for, and what its program reads instead (None: the same, as torchrun reads the
    same layout from a PyTorchJob's and a TrainJob's PET_ variables)."""

    policy: str
    default_runtime: str
    env: ProgramEnv | None = None


#: The kinds converted, in the kinds table's order. No generic MPI runtime ships since
#: Trainer v2.1 (v2.0's ``mpi-distributed`` is gone): ``deepspeed-distributed`` is the MPI
#: runtime both upstream and kubetrain's stacks ship.
TO_TRAINJOB: dict[str, TrainJobKind] = {
    PYTORCH: TrainJobKind(TORCH, "torch-distributed"),
    MPI: TrainJobKind(MPI_POLICY, "deepspeed-distributed"),
    JAX: TrainJobKind(
        "jax",
        "jax-distributed",
        ProgramEnv(
            reads=(E.JAX_COORDINATOR_ADDRESS, E.JAX_NUM_PROCESSES, E.JAX_PROCESS_ID),
            instead_of=(E.COORDINATOR_ADDRESS, E.COORDINATOR_PORT, E.NUM_PROCESSES, E.PROCESS_ID),
            how="what jax.distributed.initialize() reads when given no arguments; the "
            "coordinator is node 0, port 29500",
        ),
    ),
    XGBOOST: TrainJobKind(
        "xgboost",
        "xgboost-distributed",
        ProgramEnv(
            reads=(E.DMLC_TRACKER_URI, E.DMLC_TRACKER_PORT, E.DMLC_TASK_ID, E.DMLC_NUM_WORKER),
            instead_of=(
                E.MASTER_ADDR,
                E.MASTER_PORT,
                E.RANK,
                E.WORLD_SIZE,
                E.WORKER_ADDRS,
                E.WORKER_PORT,
            ),
            how=f"the tracker runs on node 0, port 29500; {E.DMLC_NUM_WORKER} counts a worker "
            "per GPU, else per node",
        ),
    ),
}
#: The kinds refused, and why (after "a PyTorchJob, ... or XGBoostJob").
NOT_TO_TRAINJOB = {
    TENSORFLOW: "(Trainer v2 has no TensorFlow runtime: its ML policies are torch, MPI, JAX, "
    "XGBoost and Flux); keep the TFJob, which kubetrain serves",
    PADDLE: "(Trainer v2 has no PaddlePaddle policy, nor has kubetrain: none sets the PADDLE_* "
    "variables paddle.distributed.launch reads; Trainer's ML policies are torch, MPI, JAX, "
    "XGBoost and Flux); keep the PaddleJob, which kubetrain serves",
}
#: Metadata the API server writes: not the user's to carry.
SERVER_METADATA = {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _first_difference(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        pairs = [(a.get(k), b.get(k), f"{path}.{k}") for k in sorted(a.keys() | b.keys())]
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = [(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))]
    else:
        return None if a == b else (path, a, b)
    return next((d for x, y, p in pairs if (d := _first_difference(x, y, p))), None)


def _one_template(
    c: Converter, base: str, types: list[str], templates: list[dict[str, Any]], source: str
) -> dict[str, Any]:
    """Two replica types' templates as one (labels and annotations merged)."""
    (first, other), (mine, theirs) = types, templates
    diff = _first_difference(mine.get("spec"), theirs.get("spec"), f"{base}.{other}.template.spec")
    metadata = {**(theirs.get("metadata") or {}), **(mine.get("metadata") or {})}
    for key in ("labels", "annotations"):
        m, w = (((t.get("metadata") or {}).get(key) or {}) for t in (mine, theirs))
        clash = next((k for k in sorted(m.keys() & w.keys()) if m[k] != w[k]), None)
        if clash is not None and diff is None:
            diff = (f"{base}.{other}.template.metadata.{key}.{clash}", m[clash], w[clash])
        for side, ours, others in ((first, m, w), (other, w, m)):
            for k in sorted(ours.keys() - others.keys()):
                where = f"{base}.{side}.template.metadata.{key}.{k}"
                c.decide(where, None, ours[k], "only-one-side", side=side)
        metadata[key] = {**w, **m}
    if diff is not None:
        why = c.why("differ", first=first, other=other, value=render_value(diff[1]))
        raise refuse(diff[0], why, diff[2], source)
    return {"metadata": metadata, "spec": mine.get("spec")}


def _nodes(c: Converter, kind: str, spec: dict[str, Any], source: str) -> None:
    """A kind whose every replica is a node (PyTorchJob, JAXJob, XGBoostJob): its replica
    types in start order, node 0 first, all on one pod template."""
    field = kinds.KINDS[kind].replica_specs_field
    base, replicas = f"spec.{field}", spec.get(field) or {}
    present = [t for t in kinds.REPLICA_TYPES[kind] if t in replicas]
    templates = [replicas[t].get("template") or {} for t in present]
    template = templates[0]
    if len(templates) == 2:
        template = _one_template(c, base, present, templates, source)
    nodes = sum(int(replicas[t].get("replicas", 1)) for t in present)
    c.trainer["numNodes"] = nodes
    counted = " + ".join(f"{base}.{t}.replicas" for t in present)
    leader = f"the {MASTER}" if present[0] == MASTER else f"{present[0]} 0"
    c.conv.carried(counted, "spec.trainer.numNodes", c.why("nodes", leader=leader), nodes)
    for t in present:
        c.replica_policy(replicas[t], f"{base}.{t}")
    path = f"{base}.{present[0]}.template"
    main, container = main_container(template, kind)
    c.pod(template, path, NODE_JOB, main)
    cpath = f"{path}.spec.containers[{main}]"
    c.to_trainer(container, cpath)
    c.resources(container, cpath)
    c.container(container, cpath, NODE_JOB)
    if kind == PYTORCH:
        _torch_processes(c, spec)


def _torch_processes(c: Converter, spec: dict[str, Any]) -> None:
    """A PyTorchJob's processes per node, and its elastic policy (the runtime's now)."""
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


def _mpi(c: Converter, spec: dict[str, Any]) -> None:
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
        main, container = main_container(template, MPI)
        c.pod(template, f"{base}.{rtype}.template", rjob, main)
        cpath = f"{base}.{rtype}.template.spec.containers[{main}]"
        c.container(container, cpath, rjob)
        if rjob == LAUNCHER_JOB:
            c.to_trainer(container, cpath)
            worker_resources = main_container(worker, MPI)[1].get("resources")
            if not worker or container.get("resources") == worker_resources:
                c.resources(container, cpath)
            elif "resources" in container:
                c.drop(f"{cpath}.resources", container["resources"], "launcher-resources")
            continue
        c.resources(container, cpath)
        _mpi_worker(c, container, cpath)
    _mpi_policies(c, spec)


def _mpi_worker(c: Converter, container: dict[str, Any], path: str) -> None:
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


def _mpi_policies(c: Converter, spec: dict[str, Any]) -> None:
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


def _run_policy(c: Converter, spec: dict[str, Any], out: dict[str, Any]) -> None:
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


def _metadata(c: Converter, meta: dict[str, Any]) -> dict[str, Any]:
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
    framework = TO_TRAINJOB[kind].policy
    fits = sorted(n for n, r in KNOWN_RUNTIMES.items() if r.framework == framework)
    name = runtime or TO_TRAINJOB[kind].default_runtime
    known = KNOWN_RUNTIMES.get(name)
    what = {"runtime": name, "framework": framework}
    target = "spec.runtimeRef.name"
    if runtime is None:
        others = ", ".join(n for n in fits if n != name)
        others = f"; or: {others}" if others else ""
        conv.decide("kind", target, kind, WHY["default-runtime"].format(**what, others=others))
    elif known is not None and known.framework != framework:
        expected = f"a {framework} runtime for a {kind} ({', '.join(fits)}); {name} is a "
        raise refuse(target, f"{expected}{known.framework} runtime", name, source)
    elif known is None:
        conv.decide("kind", target, name, WHY["unknown-runtime"].format(**what))
    else:
        conv.carried("kind", target, WHY["known-runtime"].format(**what), kind)
    if (env := TO_TRAINJOB[kind].env) is not None:
        conv.decide("kind", None, kind, env.message())
    return name, known


def to_trainjob(wire: dict[str, Any], *, runtime: str | None, source: str = "") -> Conversion:
    """A job of a kind in :data:`TO_TRAINJOB` (wire form) as a TrainJob on
    ClusterTrainingRuntime ``runtime`` (None: the kind's default), with its notes;
    JobValidationError for a job that is invalid or cannot become a TrainJob."""
    kind = wire.get("kind") if isinstance(wire, dict) else None
    if kind not in TO_TRAINJOB:
        *some, last = TO_TRAINJOB
        why = NOT_TO_TRAINJOB.get(str(kind), "to convert to a TrainJob")
        raise refuse("kind", f"a {', '.join(some)} or {last} {why}", kind, source)
    job = load_job(wire, source).to_wire()
    conv = Conversion(output={}, source=source)
    name, known = _runtime(kind, runtime, conv, source)
    c = Converter(conv, name, known)
    metadata = _metadata(c, job.get("metadata") or {})
    spec = job.get("spec") or {}
    if kind == MPI:
        _mpi(c, spec)
    else:
        _nodes(c, kind, spec, source)
    ref = {"name": name, "kind": T.CLUSTER_TRAINING_RUNTIME}
    out: dict[str, Any] = {"runtimeRef": ref, "trainer": c.trainer}
    jobs = [{"name": j, "template": {"spec": {"template": p}}} for j, p in c.patches.items() if p]
    if jobs:
        patch = {"template": {"spec": {"replicatedJobs": jobs}}}
        out["runtimePatches"] = [{"manager": MANAGER, "trainingRuntimeSpec": patch}]
    _run_policy(c, spec, out)
    head = {"apiVersion": T.API_VERSION, "kind": T.TRAINJOB}
    conv.output = {**head, "metadata": sorted_keys(metadata), "spec": sorted_keys(out)}
    load_trainer_object(conv.output, source)  # the output must be a valid TrainJob
    return conv
