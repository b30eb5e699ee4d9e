"""Small steps every version converter takes, each leaving its note on the
:class:`~kubetrain.api.convert.report.Conversion`."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from kubetrain.api.convert.report import Conversion
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.kind_info import KindInfo

#: The fields of a replica spec in every older version (kubeflow/common's ReplicaSpec and
#: the v1beta1/v1beta2 and v1alpha2 copies of it): unchanged in the served versions.
REPLICA_SPEC_FIELDS = ("replicas", "template", "restartPolicy")


def source_name(info: KindInfo, version: str) -> str:
    """How a note names the input's version: ``TFJob kubeflow.org/v1beta1``."""
    return f"{info.kind} {info.group}/{version}"


def refuse(path: str, expected: str, value: Any, source: str) -> JobValidationError:
    """The error for an input no converter can read (what, the value, what is expected)."""
    return JobValidationError([FieldError(path, expected, value)], source)


def start(wire: dict[str, Any], info: KindInfo, version: str, conv: Conversion) -> dict[str, Any]:
    """The output's frame: the served apiVersion, the kind and the metadata as they were;
    a status is left behind (the operator writes it) and any other top-level key dropped."""
    out: dict[str, Any] = {"apiVersion": info.api_version, "kind": info.kind}
    conv.carried("apiVersion", "apiVersion", f"now {info.api_version}", f"{info.group}/{version}")
    if "metadata" in wire:
        out["metadata"] = copy.deepcopy(wire["metadata"])
    for key, value in wire.items():
        if key == "status":
            conv.decide(key, None, None, "not converted: the operator writes the status")
        elif key not in ("apiVersion", "kind", "metadata", "spec"):
            conv.dropped(key, value, "not a top-level field of a Kubernetes object")
    return out


def drop_unknown(
    conv: Conversion, mapping: dict[str, Any], known: Iterable[str], path: str, where: str
) -> None:
    """Note every key of ``mapping`` that ``where`` does not define as dropped: the API
    server of the time kept it (no structural schema), the operator never read it."""
    allowed = set(known)
    for key, value in mapping.items():
        if key not in allowed:
            conv.dropped(f"{path}.{key}", value, f"not a field of {where}: its operator ignored it")


def replica_specs(conv: Conversion, specs: Any, path: str, where: str) -> Any:
    """The replica specs, each with only the fields its version defines (a malformed value
    is carried as it is, for validation to name)."""
    if not isinstance(specs, dict):
        return copy.deepcopy(specs)
    out: dict[str, Any] = {}
    for rtype, rspec in specs.items():
        if not isinstance(rspec, dict):
            out[rtype] = copy.deepcopy(rspec)
            continue
        drop_unknown(conv, rspec, REPLICA_SPEC_FIELDS, f"{path}.{rtype}", where)
        out[rtype] = {k: copy.deepcopy(v) for k, v in rspec.items() if k in REPLICA_SPEC_FIELDS}
    return out


def into_run_policy(
    conv: Conversion, run_policy: dict[str, Any], key: str, value: Any, message: str = ""
) -> None:
    """Move a top-level ``spec.<key>`` into ``spec.runPolicy.<key>``."""
    run_policy[key] = copy.deepcopy(value)
    conv.carried(f"spec.{key}", f"spec.runPolicy.{key}", message, value)


def old_default(
    conv: Conversion, run_policy: dict[str, Any], key: str, value: Any, why: str
) -> None:
    """Write the value an older version's defaulter gave an unset field, where the served
    version's default differs, so the job keeps behaving as it did."""
    run_policy[key] = value
    conv.written_defaults.add(f"spec.runPolicy.{key}")
    conv.decide(
        f"spec.{key}",
        f"spec.runPolicy.{key}",
        value,
        f"unset: {why}; written so the job keeps its old behaviour (remove it to take "
        "kubetrain's default)",
    )


def containers_of(template: Any) -> list[Any]:
    """The containers of a pod template ([] when it has none or is malformed)."""
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    return containers if isinstance(containers, list) else []
