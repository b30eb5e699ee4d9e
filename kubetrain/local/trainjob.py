"""Planning a TrainJob's local run: the TrainJob resolved against its runtime by the
operator's own code (:func:`kubetrain.frameworks.registry.resolve_trainjob`), then one
process per pod the operator would create, each running its main container's command with the
environment the operator injects (:mod:`kubetrain.frameworks.trainjob` with a
:class:`~kubetrain.frameworks.LocalAddressing`: every pod on ``127.0.0.1``, node 0's
rendezvous on a free port).

- torch: every node gets ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
  ``PET_MASTER_ADDR`` and ``PET_MASTER_PORT``, so the trainer's ``torchrun`` starts
  ``numProcPerNode`` ranks per node; every other registered policy
  (:mod:`kubetrain.frameworks.registry`) gets its variables likewise; a runtime without an
  ML policy gets none.
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
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api.keys import (
    GPU_RESOURCE,
    JOB_COMPLETION_INDEX,
    TRAINER_STEP_DATASET_INITIALIZER,
    TRAINER_STEP_MODEL_INITIALIZER,
)
from kubetrain.api.trainer import TrainJob, apply_trainer_defaults
from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import Trainer
from kubetrain.frameworks import mpi, pytorch, trainjob
from kubetrain.frameworks.registry import resolve_trainjob
from kubetrain.frameworks.trainjob_nodes import gpus_per_node
from kubetrain.local.elastic import ElasticGroup
from kubetrain.local.plan import (
    Launcher,
    LocalKind,
    LocalPlan,
    LocalPod,
    LocalReplica,
    LocalRunError,
    elastic_plan,
    free_ports,
    local_addressing,
    plan_pods,
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
    if job.spec.framework == pytorch.POLICY.name and pytorch.trainjob_nproc_per_node(job) == "auto":
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
    first, as the operator does), planned like every kind's
    (:func:`kubetrain.local.plan.plan_pods`).

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
    resolved = resolve_trainjob(apply_trainer_defaults(job), apply_trainer_defaults(runtime))
    if resolved.spec.run_policy.suspend:
        raise LocalRunError(
            f"TrainJob/{job.name} has spec.suspend: true, so it would not run on a cluster "
            "either; remove it (or set it to false) to run it"
        )
    notes: list[str] = []
    devices = _gpu_slices(resolved, gpus, notes)
    torchrun = _torchrun_logs(scratch) if rank_prefixes else {}
    pods = []
    for rjob, index, pod_name in trainjob.pod_names(resolved):
        trainer = rjob == resolved.spec.trainer_job
        pods.append(
            LocalPod(
                replica_type=rjob,
                index=index,
                name=pod_name,
                fields={f"metadata.annotations['{JOB_COMPLETION_INDEX}']": str(index)},
                env={"CUDA_VISIBLE_DEVICES": devices[index]} if devices and trainer else {},
                env_defaults=torchrun
                if trainer and resolved.spec.framework == pytorch.POLICY.name
                else {},
            )
        )
    addressing = local_addressing(pods, ports, scratch)
    launcher = None
    sshd = mpi.sshd_replica_types(resolved)
    if sshd:
        launcher = Launcher(
            not_run_here=frozenset(sshd),
            hostfile=mpi.trainjob_hostfile(resolved, addressing),
            note=f"{resolved.spec.runtime_kind} {resolved.spec.runtime_name} uses MPI: the "
            f"{', '.join(sshd)} pods only serve sshd to the launcher, so they are not started; "
            f"the launcher's mpirun starts every rank here from {addressing.mpi_hostfile}",
        )
    plan = plan_pods(
        resolved,
        trainjob.FRAMEWORK,
        pods,
        addressing=addressing,
        entrypoint=entrypoint,
        extra_env=extra_env,
        notes=notes,
        launcher=launcher,
        kind=TRAINJOB_RULES,
    )
    bounds = pytorch.trainjob_elastic_bounds(resolved)
    if bounds is None:
        return plan
    chosen = dict(addressing.ports)
    trainer_job = resolved.spec.trainer_job

    def rescale(nodes: int) -> list[LocalReplica]:
        # A scaled elastic TrainJob is the same TrainJob with spec.trainer.numNodes changed.
        trainer = job.spec.trainer or Trainer()
        scaled = job.model_copy(
            update={
                "spec": job.spec.model_copy(
                    update={"trainer": trainer.model_copy(update={"num_nodes": nodes})}
                )
            }
        )
        # Pods in trainjob.pod_names' order, those that run keeping their ports.
        pods = [
            (name, index)
            for name in resolved.spec.replicated_jobs
            for index in range(nodes if name == trainer_job else resolved.pods_of(name))
        ]
        extra = iter(free_ports(len(pods)))
        again = plan_trainjob(
            scaled,
            runtime,
            scratch=scratch,
            entrypoint=entrypoint,
            extra_env=extra_env,
            ports=[chosen.get(pod) or next(extra) for pod in pods],
            gpus=gpus,
            rank_prefixes=rank_prefixes,
        )
        return [r for r in again.replicas if r.replica_type == trainer_job]

    policy_restarts = plan.replicas[0].env.get(E.PET_MAX_RESTARTS) if plan.replicas else None
    return elastic_plan(
        plan,
        ElasticGroup(
            replica_type=trainer_job,
            low=bounds[0],
            high=bounds[1],
            nodes=resolved.pods_of(trainer_job),
            max_restarts=int(policy_restarts) if policy_restarts else None,
            rescale=rescale,
        ),
        scratch,
    )


def _no_command(where: str, container: Mapping[str, Any]) -> str:
    return (
        f"{where}: the {container.get('name')} container has no command (it would "
        f"run its image {container.get('image')!r}); give the TrainJob "
        "spec.trainer.command, or pass --entrypoint 'torchrun train.py'"
    )


#: What a TrainJob adds to the shared planning.
TRAINJOB_RULES = LocalKind(
    success_phase=COMPLETE,
    optional_steps=frozenset(INITIALIZERS),
    prepare=trainjob.with_completion_index,
    no_command=_no_command,
)


def _torchrun_logs(scratch: Path) -> dict[str, str]:
    """torchrun's settings (its options read ``PET_<OPTION>``) that copy each rank's
    stdout and stderr to the console with a ``[rank<N>]:`` prefix."""
    return {
        E.PET_TEE: "3",
        E.PET_LOG_DIR: str(scratch / "torchrun"),
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
