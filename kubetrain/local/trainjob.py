"""Planning a TrainJob's local run: the TrainJob resolved against its runtime by the
operator's own code (:func:`kubetrain.api.trainer.resolve.resolve`), then one process per
pod the operator would create, each running its main container's command with the
environment the operator injects (:mod:`kubetrain.frameworks.trainjob` with a
:class:`~kubetrain.frameworks.LocalAddressing`: every pod on ``127.0.0.1``, node 0's
rendezvous on a free port).

- torch: every node gets ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
  ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT``, so the trainer's ``torchrun`` starts
  ``numProcPerNode`` ranks per node; JAX and XGBoost get their variables likewise; a
  runtime without an ML policy gets none.
- MPI: only the launcher runs (the ``node`` pods serve sshd to it); the hostfile is
  written as the operator writes it, with this machine's slots, so its ``mpirun`` starts
  every rank here.
- Initializers run first, in ``dependsOn`` order, when their container has a command;
  one without (it would run its image's entrypoint) is skipped with a note.
- GPUs: when the trainer asks for ``nvidia.com/gpu`` and this machine shows enough, each
  node gets its own ``CUDA_VISIBLE_DEVICES`` slice; when it shows too few and torchrun
  would pick the process count itself (``auto``), the plan is refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubetrain.api.keys import (
    GPU_RESOURCE,
    JOB_COMPLETION_INDEX,
    TRAINER_STEP_DATASET_INITIALIZER,
    TRAINER_STEP_MODEL_INITIALIZER,
)
from kubetrain.api.trainer import TrainJob, apply_trainer_defaults
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import NODE_JOB, ResolvedTrainJob, resolve
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.frameworks import LocalAddressing, mpi, pytorch, trainjob
from kubetrain.frameworks.replicas import main_container
from kubetrain.frameworks.trainjob_nodes import gpus_per_node
from kubetrain.local.plan import (
    LocalPlan,
    LocalReplica,
    LocalRunError,
    command_of,
    free_ports,
    manifest_env,
    pod_fields,
)

#: What a TrainJob's success is called (its terminal condition type).
COMPLETE = "Complete"
#: torchrun prefixes each rank's lines with its global rank (``[rank3]:``).
RANK_PREFIX_TEMPLATE = "[rank${rank}]:"
#: Replicated jobs that prepare data or a model before the trainer (by upstream's names).
INITIALIZERS = (TRAINER_STEP_DATASET_INITIALIZER, TRAINER_STEP_MODEL_INITIALIZER)


def runtime_matches(job: TrainJob, runtime: RuntimeBase) -> bool:
    """Whether ``runtime`` is the one ``job``'s ``runtimeRef`` names (kind and name; a
    TrainingRuntime also by namespace, when both say one)."""
    ref = job.spec.runtime_ref
    kind = ref.kind or T.DEFAULT_RUNTIME_KIND
    if runtime.kind != kind or runtime.name != ref.name:
        return False
    if kind == T.TRAINING_RUNTIME:
        mine, theirs = job.metadata.namespace, runtime.metadata.namespace
        return not (mine and theirs and mine != theirs)
    return True


def visible_gpus() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else the indexes
    ``nvidia-smi -L`` lists (none without it)."""
    declared = os.environ.get("CUDA_VISIBLE_DEVICES")
    if declared is not None:
        return [part.strip() for part in declared.split(",") if part.strip()]
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        listed = subprocess.run(
            [tool, "-L"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    lines = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    return [str(index) for index in range(len(lines))] if listed.returncode == 0 else []


def _gpu_slices(job: ResolvedTrainJob, gpus: Sequence[str], notes: list[str]) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` per trainer node ([] when devices are not split)."""
    wanted = gpus_per_node(job)
    if wanted <= 0:
        return []
    nodes = job.pods_of(job.spec.trainer_job)
    if wanted * nodes <= len(gpus):
        return [",".join(gpus[i * wanted : (i + 1) * wanted]) for i in range(nodes)]
    asked = f"{nodes} node(s) x {wanted} GPU(s) ({GPU_RESOURCE} of the node container)"
    if job.spec.framework == "torch" and pytorch.trainjob_nproc_per_node(job) == "auto":
        raise LocalRunError(
            f"TrainJob/{job.name} asks for {asked} and this machine shows {len(gpus)}: "
            "torchrun's nproc 'auto' would start one process per CPU instead; set "
            "spec.trainer.numProcPerNode (run on the CPU) or ask for at most "
            f"{len(gpus) // max(nodes, 1)} GPU(s) per node"
        )
    notes.append(
        f"TrainJob/{job.name} asks for {asked}; this machine shows {len(gpus)}, so the "
        "nodes share what there is (CUDA_VISIBLE_DEVICES is left as it is)"
    )
    return []


def _not_run_here(job: ResolvedTrainJob) -> set[str]:
    """Replicated jobs whose pods do not run locally: an MPI runtime's ``node`` pods only
    serve sshd to the launcher, whose mpirun starts the ranks here."""
    return {NODE_JOB} if job.spec.mpi is not None else set()


def plan_trainjob(
    job: TrainJob,
    runtime: RuntimeBase,
    *,
    scratch: Path,
    entrypoint: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    ports: Sequence[int] | None = None,
    gpus: Sequence[str] = (),
    rank_prefixes: bool = False,
) -> LocalPlan:
    """The processes that run ``job`` with ``runtime`` on this machine (both defaulted
    first, as the operator does).

    ``scratch`` holds generated files (an MPI hostfile); ``ports`` are handed out one per
    pod (free ports when omitted); ``gpus`` are this machine's devices
    (:func:`visible_gpus`). With ``rank_prefixes``, a torch trainer's torchrun is told
    (``PET_TEE``, ``PET_LOG_DIR`` under ``scratch``, its log prefix template) to copy every
    rank's output with a ``[rank<N>]:`` prefix, unless the manifest or ``extra_env``
    already set those variables. Raises :class:`JobValidationError` when the pair cannot be
    resolved (what the operator would report on the TrainJob) and :class:`LocalRunError`
    when it cannot run here.
    """
    if not runtime_matches(job, runtime):
        ref = job.spec.runtime_ref
        raise LocalRunError(
            f"TrainJob/{job.name} names {ref.kind or T.DEFAULT_RUNTIME_KIND} {ref.name}, "
            f"not {runtime.kind} {runtime.name}{_namespace_of(runtime)}"
        )
    resolved = resolve(apply_trainer_defaults(job), apply_trainer_defaults(runtime))
    if resolved.spec.run_policy.suspend:
        raise LocalRunError(
            f"TrainJob/{job.name} has spec.suspend: true, so it would not run on a cluster "
            "either; remove it (or set it to false) to run it"
        )
    framework = trainjob.FRAMEWORK
    namespace = job.metadata.namespace or "default"
    pods = trainjob.pod_names(resolved)
    chosen = list(ports) if ports is not None else free_ports(len(pods))
    if len(chosen) < len(pods):
        raise LocalRunError(f"{len(pods)} ports are needed, {len(chosen)} were given")
    hostfile = scratch / "hostfile"
    addressing = LocalAddressing(
        ports={(rjob, index): port for (rjob, index, _), port in zip(pods, chosen, strict=False)},
        mpi_hostfile=str(hostfile),
    )
    notes: list[str] = []
    files: dict[Path, str] = {}
    absent: set[tuple[str, int]] = set()
    skipped = _not_run_here(resolved)
    if skipped:
        files[hostfile] = mpi.trainjob_hostfile(resolved, addressing)
        notes.append(
            f"{resolved.spec.runtime_kind} {resolved.spec.runtime_name} uses MPI: the "
            f"{', '.join(sorted(skipped))} pods only serve sshd to the launcher, so they are "
            f"not started; the launcher's mpirun starts every rank here from {hostfile}"
        )
    devices = _gpu_slices(resolved, gpus, notes)
    torchrun_logs = _torchrun_logs(scratch) if rank_prefixes else {}
    replicas: list[LocalReplica] = []
    for rjob, index, pod_name in pods:
        where = f"TrainJob/{job.name} {rjob}[{index}]"
        if rjob in skipped:
            absent.add((rjob, index))
            continue
        template = resolved.spec.replicated_jobs[rjob].template
        container = main_container(template, framework.run_container(resolved, rjob) or "")
        if container is None:
            raise LocalRunError(f"{where}: the pod template has no containers")
        if not container.get("command") and rjob in INITIALIZERS:
            absent.add((rjob, index))
            notes.append(
                f"{where}: the {rjob} container has no command (it runs its image "
                f"{container.get('image')!r}), so it is skipped here and counted as Complete"
            )
            continue
        if len(template.get("spec", {}).get("containers") or []) > 1:
            notes.append(f"{where}: only container {container.get('name')!r} runs locally")
        fields = pod_fields(
            pod_name,
            namespace,
            **{f"metadata.annotations['{JOB_COMPLETION_INDEX}']": str(index)},
        )
        env = manifest_env(trainjob.with_completion_index(container), where=where, fields=fields)
        injected = framework.container_env(resolved, rjob, index, container, addressing)
        env.update(manifest_env({"env": injected}, where=where, fields=fields))
        trainer = rjob == resolved.spec.trainer_job
        if devices and trainer:
            env["CUDA_VISIBLE_DEVICES"] = devices[index]
        env.update(extra_env or {})
        if trainer and resolved.spec.framework == "torch":
            env = {**torchrun_logs, **env}
        if not container.get("command") and not entrypoint:
            raise LocalRunError(
                f"{where}: the {container.get('name')} container has no command (it would "
                f"run its image {container.get('image')!r}); give the TrainJob "
                "spec.trainer.command, or pass --entrypoint 'torchrun train.py'"
            )
        argv = command_of(container, env, where=where, entrypoint=list(entrypoint))
        replicas.append(
            LocalReplica(
                replica_type=rjob,
                index=index,
                container=str(container.get("name", "")),
                argv=argv,
                env=env,
            )
        )
    return LocalPlan(
        job=resolved,
        framework=framework,
        replicas=replicas,
        files=files,
        notes=notes,
        absent=frozenset(absent),
        success_phase=COMPLETE,
    )


def _torchrun_logs(scratch: Path) -> dict[str, str]:
    """torchrun's settings (its options read ``PET_<OPTION>``) that copy each rank's
    stdout and stderr to the console with a ``[rank<N>]:`` prefix."""
    return {
        "PET_TEE": "3",
        "PET_LOG_DIR": str(scratch / "torchrun"),
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": RANK_PREFIX_TEMPLATE,
    }


def _namespace_of(runtime: RuntimeBase) -> str:
    namespace = runtime.metadata.namespace
    return f" in namespace {namespace}" if namespace else ""


__all__ = [
    "COMPLETE",
    "RANK_PREFIX_TEMPLATE",
    "plan_trainjob",
    "runtime_matches",
    "visible_gpus",
]
