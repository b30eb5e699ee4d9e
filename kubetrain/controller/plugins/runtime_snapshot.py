"""A TrainJob's runtime as it was when the job was first reconciled, pinned in ConfigMap
``<trainjob>-runtime-snapshot`` (key ``runtime``, the runtime as YAML), as upstream
Trainer v2.3.0 does (proposal 2599, mutable runtimes).

The job is built from the snapshot for the rest of its life: a runtime edited or deleted
afterwards changes nothing for it (a suspended job resumes with the image it started
with). The ConfigMap is controlled by the TrainJob and goes with it (garbage collection).
Only this module writes and reads the snapshot; ``cluster_state`` fetches its data (the
ConfigMap informer keeps metadata only) and the TrainJob plugin decides what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from kubetrain.api.common import JobBase as Job
from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import constants as T
from kubetrain.controller.plugins import children

SUFFIX = "-runtime-snapshot"
#: The ConfigMap key holding the runtime (upstream's ``runtimeDataKey``).
DATA_KEY = "runtime"
#: The runtime's metadata the snapshot keeps (which version of the runtime it was).
_KEPT_META = ("name", "namespace", "uid", "resourceVersion", "generation", "labels", "annotations")

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def snapshot_name(trainjob_name: str) -> str:
    return trainjob_name + SUFFIX


def config_map(job: Job, runtime: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot ConfigMap of ``job`` holding ``runtime`` (as the API server served it)."""
    meta = runtime.get("metadata") or {}
    pinned = {
        "apiVersion": runtime.get("apiVersion"),
        "kind": runtime.get("kind"),
        "metadata": {k: meta[k] for k in _KEPT_META if meta.get(k) not in (None, "", {})},
        "spec": runtime.get("spec") or {},
    }
    text = yaml.dump(pinned, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": children.metadata(job, snapshot_name(job.name), children.job_labels(job)),
        "data": {DATA_KEY: text},
    }


def read(
    data: Mapping[str, Any], trainjob_name: str, ref: tuple[str, str]
) -> tuple[dict[str, Any] | None, FieldError | None]:
    """The runtime pinned in a snapshot ConfigMap's ``data``, checked against the
    TrainJob's ``(kind, name)`` runtimeRef; or the problem with it (what is wrong, and
    how to take a new snapshot: delete the ConfigMap)."""
    where = f"ConfigMap {snapshot_name(trainjob_name)} data.{DATA_KEY}"
    fix = (
        "the runtime this TrainJob was started with, as the operator wrote it (delete the "
        "ConfigMap to pin the runtime as it is now)"
    )
    text = data.get(DATA_KEY)
    if not isinstance(text, str):
        return None, FieldError(where, fix, kind="required")
    try:
        runtime = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        return None, FieldError(where, f"{fix}; it is not YAML: {err}".replace("\n", " "))
    if not isinstance(runtime, dict):
        return None, FieldError(where, fix, runtime)
    kind, name = ref
    group = str(runtime.get("apiVersion") or "").split("/")[0]
    found = (runtime.get("kind"), group, (runtime.get("metadata") or {}).get("name"))
    if found != (kind, T.GROUP, name):
        wanted = f"{kind} {name} ({T.GROUP}), the runtime spec.runtimeRef names"
        return None, FieldError(where, f"{fix}: it pins {found[0]} {found[2]} ({found[1]}), "
                                f"expected {wanted}")  # fmt: skip
    return runtime, None
