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

import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from kubetrain.api.base import K8sSchema, ListType
from kubetrain.api.crd_generator import find_info, openapi_schema
from kubetrain.api.embedded import (
    _list_type,
    drop_pruned_nulls,
    status_is_ignored,
    without_status,
)
from kubetrain.api.embedded import validator_for as embedded_validator
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.limits import DEFAULT_REPLICA_LIMITS, ReplicaLimits
from kubetrain.api.loader import (
    JOB_TYPES,
    Job,
    _from_pydantic,
    _from_schema_error,
    load_job,
    read_manifest,
)
from kubetrain.api.meta import OBJECT_META_FIELDS, check_object_meta
from kubetrain.api.reading import read_documents
from kubetrain.api.trainer.constants import API_VERSION
from kubetrain.api.trainer.crds import TRAINER_CRD_INFOS
from kubetrain.api.trainer.invariants import check_rules
from kubetrain.api.trainer.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.api.wire import wire_copy

TrainerObject = TrainJob | TrainingRuntime | ClusterTrainingRuntime
TRAINER_TYPES: dict[str, type[TrainerObject]] = {
    "TrainJob": TrainJob,
    "TrainingRuntime": TrainingRuntime,
    "ClusterTrainingRuntime": ClusterTrainingRuntime,
}
#: Any object kubetrain serves.
KubetrainObject = Job | TrainerObject
KINDS = (*JOB_TYPES, *TRAINER_TYPES)


def _kind_error(raw_kind: Any, kinds: tuple[str, ...]) -> FieldError:
    if raw_kind is None:
        return FieldError("kind", f"one of: {', '.join(kinds)}", kind="required")
    return FieldError("kind", f"must be one of: {', '.join(kinds)}", raw_kind)


def load_trainer_object(
    obj: Any, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> TrainerObject:
    """Parse a TrainJob, TrainingRuntime or ClusterTrainingRuntime from its wire form;
    raise :class:`JobValidationError` listing every problem.

    ``limits`` are the cluster's (the ones its CRDs were generated with): a TrainJob's or a
    runtime's ``numNodes`` is at most ``max_replicas_per_type``."""
    wire, shape_errors = wire_copy(obj)
    if shape_errors:
        raise JobValidationError(shape_errors, source)
    if not isinstance(wire, dict):
        raise JobValidationError(
            [FieldError("", "a mapping with apiVersion, kind, metadata and spec", wire)], source
        )
    raw_kind = wire.get("kind")
    model = TRAINER_TYPES.get(raw_kind) if isinstance(raw_kind, str) else None
    if model is None or not isinstance(raw_kind, str):
        raise JobValidationError([_kind_error(raw_kind, tuple(TRAINER_TYPES))], source)
    kind: str = raw_kind
    wire = drop_pruned_nulls(wire, _null_schema(kind))
    errors: list[FieldError] = []
    api_version = wire.get("apiVersion")
    if api_version is None:
        errors.append(FieldError("apiVersion", f"{API_VERSION} for a {kind}", kind="required"))
    elif api_version != API_VERSION:
        errors.append(FieldError("apiVersion", f"must be {API_VERSION} for a {kind}", api_version))
    loaded: BaseModel | None = None
    try:
        # Only the camelCase wire names: the API server knows no others.
        loaded = model.model_validate(wire, by_alias=True, by_name=False)
    except PydanticError as exc:
        errors.extend(e for e in _from_pydantic(exc, model, kind) if e.path != "apiVersion")
    errors.extend(_schema_walk_errors(model, wire))
    errors.extend(check_object_meta(wire.get("metadata")))
    errors.extend(check_rules(kind, wire, limits))
    # Only a kind with a status (TrainJob: the status subresource) has one to ignore.
    if "status" in model.model_fields and status_is_ignored(wire, errors):
        return load_trainer_object(without_status(wire), source, limits=limits)
    if errors or loaded is None:
        raise JobValidationError(errors, source)
    assert isinstance(loaded, TrainJob | TrainingRuntime | ClusterTrainingRuntime)
    return loaded


@cache
def _null_schema(kind: str) -> dict[str, Any]:
    """The kind's CRD schema, with metadata as the API server reads it."""
    schema = openapi_schema(find_info(TRAINER_CRD_INFOS, kind), DEFAULT_REPLICA_LIMITS)
    meta_fields: dict[str, Any] = {key: {} for key in OBJECT_META_FIELDS}
    meta_fields["labels"] = meta_fields["annotations"] = {"additionalProperties": {}}
    schema["properties"] = {**schema["properties"], "metadata": {"properties": meta_fields}}
    return schema


# --- what the typed models leave to the schemas: embedded Kubernetes types, list keys ------


def _schema_walk_errors(model: type[BaseModel], wire: dict[str, Any]) -> list[FieldError]:
    """Errors of the embedded Kubernetes values (against the pinned schemas) and of the
    lists whose items the API server requires to have unique keys."""
    errors: list[FieldError] = []
    for path, marker, value in _marked_values(model, wire, []):
        if isinstance(marker, K8sSchema):
            for error in embedded_validator(marker.definition).iter_errors(value):
                errors.extend(_from_schema_error(path, error))
        else:
            keys_schema = {
                "x-kubernetes-list-map-keys": list(marker.keys),
                "items": {
                    "properties": {key: {"default": d} for key, d in marker.key_defaults},
                },
            }
            for error in _list_type(None, marker.kind, value, keys_schema):  # type: ignore[arg-type]
                errors.extend(_from_schema_error(path, error))
    return errors


def _marked_values(
    model: type[BaseModel], wire: Any, path: list[str | int]
) -> Iterator[tuple[list[str | int], K8sSchema | ListType, Any]]:
    """(path, marker, value) of every value of ``wire`` whose field carries a K8sSchema
    (an embedded Kubernetes type, a mapping) or a ListType with unique items (a list)."""
    if not isinstance(wire, dict):
        return
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in wire:
            yield from _walk(field.annotation, list(field.metadata), wire[key], [*path, key])


def _walk(
    annotation: Any, metadata: list[Any], value: Any, path: list[str | int]
) -> Iterator[tuple[list[str | int], K8sSchema | ListType, Any]]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            yield from _walk(args[0], metadata, value, path)
        return
    if origin is Annotated:
        base, *extra = get_args(annotation)
        yield from _walk(base, [*extra, *metadata], value, path)
        return
    for marker in metadata:
        if isinstance(marker, K8sSchema):
            if isinstance(value, dict):
                yield path, marker, value
            return
        if isinstance(marker, ListType) and marker.kind != "atomic" and isinstance(value, list):
            yield path, marker, value
    if origin is list and isinstance(value, list):
        (item,) = get_args(annotation)
        for index, element in enumerate(value):
            yield from _walk(item, [], element, [*path, index])
    elif origin is dict and isinstance(value, dict):
        _, item = get_args(annotation)
        for key, element in value.items():
            yield from _walk(item, [], element, [*path, key])
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _marked_values(annotation, value, path)


# --- any kind -------------------------------------------------------------------------------------


def load_object(
    obj: Any, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> KubetrainObject:
    """Parse any kind kubetrain serves (PyTorchJob, TFJob, MPIJob, TrainJob,
    TrainingRuntime, ClusterTrainingRuntime); raise :class:`JobValidationError`."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if isinstance(kind, str) and kind in TRAINER_TYPES:
        return load_trainer_object(obj, source, limits=limits)
    if isinstance(kind, str) and kind in JOB_TYPES:
        return load_job(obj, source, limits=limits)
    if isinstance(obj, dict) and (kind is None or isinstance(kind, str)):
        raise JobValidationError([_kind_error(kind, KINDS)], source)
    # Not a mapping, or a kind that is not text: the job loader says what is wrong.
    return load_job(obj, source, limits=limits)


def load_objects_from_yaml(
    text: str, source: str = "", *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> Iterator[tuple[int, KubetrainObject | JobValidationError]]:
    """Parse every YAML document; yields (document index, object or its errors).

    A document that cannot be read at all (invalid YAML, nested too deep, an alias bomb)
    raises :class:`JobValidationError` before anything is yielded."""
    documents = list(read_documents(text, source))
    for index, document in enumerate(documents):
        label = f"{source} document {index + 1}" if source else f"document {index + 1}"
        try:
            yield index, load_object(document, label, limits=limits)
        except JobValidationError as exc:
            yield index, exc


def load_object_file(
    path: str | Path, *, limits: ReplicaLimits = DEFAULT_REPLICA_LIMITS
) -> KubetrainObject:
    """Load the single object in a YAML file (:class:`JobValidationError` when it is not
    one valid object, :class:`OSError` when the file cannot be read)."""
    text = read_manifest(path)
    results = list(load_objects_from_yaml(text, str(path), limits=limits))
    if len(results) != 1:
        raise JobValidationError(
            [FieldError("", f"exactly one document, found {len(results)}")], str(path)
        )
    result = results[0][1]
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
