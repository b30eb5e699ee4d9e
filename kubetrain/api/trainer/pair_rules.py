"""Upstream v2.3.0's rules that compare a TrainJob with its runtime (its JobSet plugin's
``Validate``), with upstream's wording.

Upstream's webhook refuses such a TrainJob at submission; kubetrain has no webhook, so
the operator fails it (``InvalidSpec``, the message naming the rule) before making
anything, and ``kubetrain run --local`` refuses it the same way, as does ``kubetrain
validate`` given the runtime among its files (all go through ``resolve``):

- ``spec.initializer.dataset`` (``model``) needs the runtime's ``dataset-initializer``
  (``model-initializer``) job, a container of that name in it, and on that container a
  volumeMount named ``initializer`` (where the initializer leaves what the trainer reads);
  the message names the runtime (``runtime x (TrainingRuntime) is invalid: must have
  ...``), where the fix is;
- each ``runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]`` entry must
  name a job of the runtime, and its (init)containers containers of that job. (Env on
  the ``node`` and initializer containers is refused at admission already, by CEL.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.api import keys
from kubetrain.api.errors import FieldError
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob

#: The volume (and mount) an initializer writes its download to.
INITIALIZER_VOLUME = "initializer"
_STEPS = (
    ("dataset", keys.TRAINER_STEP_DATASET_INITIALIZER, "datasetConfig"),
    ("model", keys.TRAINER_STEP_MODEL_INITIALIZER, "modelConfig"),
)


def _pod_spec(job_template: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((job_template.get("spec") or {}).get("template") or {}).get("spec") or {}


def _runtime_fault(trainjob: TrainJob, runtime: RuntimeBase, problem: str) -> FieldError:
    """``problem`` of the runtime ``spec.runtimeRef`` names, the runtime named plainly."""
    return FieldError(
        "spec.runtimeRef",
        problem,
        trainjob.spec.runtime_ref.to_wire(),
        subject=f"runtime {runtime.name} ({runtime.kind})",
    )


def pair_errors(trainjob: TrainJob, runtime: RuntimeBase) -> list[FieldError]:
    """Every rule above ``trainjob`` breaks against ``runtime``."""
    errors: list[FieldError] = []
    pods = {r.name: _pod_spec(r.template) for r in runtime.replicated_jobs()}
    names = {
        job: {
            c.get("name") for key in ("initContainers", "containers") for c in spec.get(key) or []
        }
        for job, spec in pods.items()
    }
    initializer = trainjob.spec.initializer.to_wire() if trainjob.spec.initializer else {}
    for source, step, config in _STEPS:
        if not initializer.get(source):
            continue
        if step not in pods:
            problem = f"must have {step} job when trainJob is configured with input {config}"
        elif step not in names[step]:
            problem = f"must have container with name - {step} in the {step} job"
        elif not any(
            m.get("name") == INITIALIZER_VOLUME
            for c in pods[step].get("containers") or []
            if c.get("name") == step
            for m in c.get("volumeMounts") or []
        ):
            problem = (
                f"must have volumeMount with name - {INITIALIZER_VOLUME} in container {step} "
                f"of the {step} job"
            )
        else:
            continue
        errors.append(_runtime_fault(trainjob, runtime, problem))
    for index, patch in enumerate(trainjob.spec.runtime_patches or []):
        wire = patch.to_wire()
        jobs = ((wire.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for rjob in jobs.get("replicatedJobs") or []:
            path = f"spec.runtimePatches[{index}]"
            job = rjob.get("name")
            if job not in pods:
                errors.append(
                    FieldError(
                        path,
                        "must not have replicated job that doesn't exist in the runtime job "
                        f"template ({runtime.kind} {runtime.name} has {', '.join(pods)})",
                        job,
                    )
                )
                continue
            spec = _pod_spec(rjob.get("template") or {})
            for key, noun in (("initContainers", "initContainer"), ("containers", "container")):
                for container in spec.get(key) or []:
                    name = container.get("name")
                    if name not in names[job]:
                        errors.append(
                            FieldError(
                                path,
                                f"must not have {noun} that doesn't exist in the runtime job {job}",
                                name,
                            )
                        )
    return errors
