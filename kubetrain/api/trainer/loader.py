"""Parsing the Trainer v2 kinds, and any kubetrain kind, from dicts and YAML.

:func:`load_trainer_object` reads a TrainJob, TrainingRuntime or ClusterTrainingRuntime
with the same strictness as :func:`kubetrain.api.loader.load_job` reads the Kubeflow v1
jobs: the input is first copied into the shape the API server would hold (bounded in
depth and size, the nulls the server prunes dropped), then checked by the typed models
(camelCase wire names only), the embedded Kubernetes schemas of the pinned release, the
list-map keys the server requires unique, the metadata rules and the cross-field rules
the CRDs also enforce (``kubetrain.api.trainer.invariants``). Every problem is reported
at once, with its path. An object that loads reloads from its ``to_wire()``.

:func:`load_object` and :func:`load_objects_from_yaml` take any kind kubetrain serves and
hand it to the right loader (``kubetrain validate`` uses them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubetrain.api.embedded import status_is_ignored, without_status
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.loader import JOB_TYPES, Job, load_job, read_manifest
from kubetrain.api.loading import kind_error, load_documents, load_typed, read_kind, the_one
from kubetrain.api.rules import run_rules
from kubetrain.api.trainer.constants import API_VERSION
from kubetrain.api.trainer.crds import TRAINER_CRD_INFOS
from kubetrain.api.trainer.invariants import rules_for
from kubetrain.api.trainer.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainer.trainjob import TrainJob

TrainerObject = TrainJob | TrainingRuntime | ClusterTrainingRuntime
TRAINER_TYPES: dict[str, type[TrainerObject]] = {
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
}
#: Any object kubetrain serves.
KubetrainObject = Job | TrainerObject
KINDS = (*JOB_TYPES, *TRAINER_TYPES)


def load_trainer_object(
    obj: Any, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> TrainerObject:
    """Parse a TrainJob, TrainingRuntime or ClusterTrainingRuntime from its wire form;
    raise :class:`JobValidationError` listing every problem.

    ``limits`` are the cluster's (the ones its CRDs were generated with): a TrainJob's or a
    runtime's ``numNodes`` is at most ``max_replicas_per_type``."""
    wire, kind, model = read_kind(obj, source, TRAINER_TYPES, TRAINER_CRD_INFOS)
    errors: list[FieldError] = []
    api_version = wire.get("apiVersion")
    if api_version is None:
        errors.append(FieldError("apiVersion", f"{API_VERSION} for a {kind}", kind="required"))
    elif api_version != API_VERSION:
        errors.append(FieldError("apiVersion", f"must be {API_VERSION} for a {kind}", api_version))
    loaded, typed_errors = load_typed(model, kind, wire)
    errors.extend(typed_errors)
    errors.extend(run_rules(rules_for(kind, limits), wire))
    # Only a kind with a status (TrainJob: the status subresource) has one to ignore.
    if "status" in model.model_fields and status_is_ignored(wire, errors):
        return load_trainer_object(without_status(wire), source, limits=limits)
    if errors or loaded is None:
        raise JobValidationError(errors, source)
    assert isinstance(loaded, TrainJob | TrainingRuntime | ClusterTrainingRuntime)
    return loaded


# --- any kind -------------------------------------------------------------------------------------


def load_object(
    obj: Any, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> KubetrainObject:
    """Parse any kind kubetrain serves (the v1 job kinds, TrainJob,
    TrainingRuntime, ClusterTrainingRuntime); raise :class:`JobValidationError`."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if isinstance(kind, str) and kind in TRAINER_TYPES:
        return load_trainer_object(obj, source, limits=limits)
    if isinstance(kind, str) and kind in JOB_TYPES:
        return load_job(obj, source, limits=limits)
    if isinstance(obj, dict) and (kind is None or isinstance(kind, str)):
        raise JobValidationError([kind_error(kind, KINDS)], source)
    # Not a mapping, or a kind that is not text: the job loader says what is wrong.
    return load_job(obj, source, limits=limits)


def load_objects_from_yaml(
    text: str, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> Iterator[tuple[int, KubetrainObject | JobValidationError]]:
    """Parse every YAML document; yields (document index, object or its errors), raising
    :class:`JobValidationError` first when one cannot be read at all (:func:`load_documents`)."""
    return load_documents(text, source, lambda doc, label: load_object(doc, label, limits=limits))


def load_object_file(
    path: str | Path, *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> KubetrainObject:
    """Load the single object in a YAML file (:class:`JobValidationError` when it is not
    one valid object, :class:`OSError` when the file cannot be read)."""
    results = list(load_objects_from_yaml(read_manifest(path), str(path), limits=limits))
    result = the_one(results, path, "document")
    if isinstance(result, JobValidationError):
        raise result
    return result


__all__ = [
    "KINDS",
    "TRAINER_TYPES",
    "KubetrainObject",
    "TrainerObject",
    "load_object",
    "load_object_file",
    "load_objects_from_yaml",
    "load_trainer_object",
]
