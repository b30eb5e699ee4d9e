"""MPIJob ``kubeflow.org/v1alpha1`` -> ``kubeflow.org/v2beta1``: one ``template`` for the
launcher and the workers becomes two replica specs, built as mpi-operator's v1alpha1
controller built its launcher Job and worker StatefulSet (v0.2.0-v0.3.0,
``pkg/controllers/v1alpha1/mpi_job_controller.go``: ``allocateProcessingUnits``,
``newLauncher``, ``newWorker``, ``newConfigMap``).
"""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api.convert.moves import containers_of, into_run_policy, old_default
from kubetrain.api.convert.report import Conversion
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.keys import GPU_RESOURCE

#: The label and taint v1alpha1's ``launcherOnMaster`` steered the launcher to.
MASTER_ROLE = "node-role.kubernetes.io/master"
WORKERS = "spec.mpiReplicaSpecs.Worker"
LAUNCHER = "spec.mpiReplicaSpecs.Launcher"


def _count(spec: dict[str, Any], key: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobValidationError([FieldError(f"spec.{key}", "must be an integer >= 1", value)])
    return value


def from_v1alpha1(spec: dict[str, Any], conv: Conversion) -> dict[str, Any]:
    template = spec.get("template")
    containers = containers_of(template)
    if not containers or not isinstance(containers[0], dict):
        raise JobValidationError(
            [
                FieldError(
                    "spec.template.spec.containers",
                    "a pod template with at least one container: v1alpha1 runs the "
                    "launcher and the workers from its first container",
                    kind="required",
                )
            ]
        )
    assert isinstance(template, dict)
    resource, per_worker, workers = _allocate(spec, containers[0], conv)
    launcher = _launcher_template(template, spec, conv)
    worker = _worker_template(template, resource, per_worker, conv)
    out: dict[str, Any] = {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": launcher},
            "Worker": {"replicas": workers, "template": worker},
        }
    }
    if launcher.get("spec", {}).pop("restartPolicy", None) == "Never":
        out["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Never"
    worker.get("spec", {}).pop("restartPolicy", None)
    if "restartPolicy" in template.get("spec", {}):
        conv.decide(
            "spec.template.spec.restartPolicy",
            f"{LAUNCHER}.restartPolicy",
            template["spec"]["restartPolicy"],
            "v1alpha1's launcher kept Never and ran anything else as OnFailure (v2beta1's "
            "default); its workers always restarted (a StatefulSet)",
        )
    slots = spec.get("slotsPerWorker")
    if slots is not None:
        conv.carried("spec.slotsPerWorker", "spec.slotsPerWorker", "unchanged", slots)
    else:
        slots = per_worker if per_worker > 0 else 1
        conv.carried(
            "spec.slotsPerWorker",
            "spec.slotsPerWorker",
            f"unset: {slots}, the processing units per worker, as v1alpha1's hostfile had",
        )
    out["slotsPerWorker"] = slots
    run_policy: dict[str, Any] = {}
    for key in ("backoffLimit", "activeDeadlineSeconds"):
        if key in spec:
            into_run_policy(conv, run_policy, key, spec[key])
    old_default(
        conv,
        run_policy,
        "cleanPodPolicy",
        "Running",
        "v1alpha1 scaled the workers to 0 when the launcher finished and kept the "
        "launcher's pod, which is Running",
    )
    out["runPolicy"] = run_policy
    return out


def _allocate(
    spec: dict[str, Any], container: dict[str, Any], conv: Conversion
) -> tuple[str, int, int]:
    """(resource name, units per worker, worker count) as ``allocateProcessingUnits``."""
    resource = spec.get("processingResourceType") or GPU_RESOURCE
    if resource not in (GPU_RESOURCE, "cpu"):
        conv.decide(
            "spec.processingResourceType",
            None,
            resource,
            f"neither {GPU_RESOURCE} nor cpu: v1alpha1 used {GPU_RESOURCE}",
        )
        resource = GPU_RESOURCE
    gpus, units = _count(spec, "gpus"), _count(spec, "processingUnits")
    if gpus is not None and units is not None:
        raise JobValidationError(
            [FieldError("spec.gpus", "not both gpus and processingUnits (v1alpha1)", gpus)]
        )
    if gpus is None and units is None:
        replicas = _count(spec, "replicas")
        if replicas is None:
            raise JobValidationError(
                [
                    FieldError(
                        "spec.replicas", "one of gpus, processingUnits or replicas", kind="required"
                    )
                ]
            )
        limits = (container.get("resources") or {}).get("limits") or {}
        per_worker = _units(limits.get(resource))
        conv.carried("spec.replicas", f"{WORKERS}.replicas", "worker count", replicas)
        return resource, per_worker, replicas
    total_key, node_key = (
        ("gpus", "gpusPerNode")
        if gpus is not None
        else (
            "processingUnits",
            "processingUnitsPerNode",
        )
    )
    total = gpus if gpus is not None else units
    assert total is not None
    per_node = _count(spec, node_key)
    if per_node is None:
        per_node = 1
        conv.decide(
            f"spec.{node_key}",
            None,
            None,
            "unset: taken as 1, the default of the v1alpha1 operator's flag; set it if "
            "your operator ran with another",
        )
    if total < per_node:
        workers, per_worker = 1, total
    elif total % per_node == 0:
        workers, per_worker = total // per_node, per_node
    else:
        raise JobValidationError(
            [
                FieldError(
                    f"spec.{total_key}",
                    f"a multiple of {node_key} ({per_node}), as v1alpha1 required",
                    total,
                )
            ]
        )
    conv.carried(
        f"spec.{total_key}",
        f"{WORKERS}.replicas",
        f"{workers} worker(s) with {per_worker} {resource} each, as v1alpha1 allocated them",
        total,
    )
    if node_key in spec:
        conv.carried(
            f"spec.{node_key}", f"{WORKERS}.replicas", "used to count the workers", per_node
        )
    for unused in ("gpusPerNode", "processingUnitsPerNode", "replicas"):
        if unused != node_key and unused in spec:
            conv.dropped(
                f"spec.{unused}", spec[unused], f"v1alpha1 ignored it with spec.{total_key}"
            )
    return resource, per_worker, workers


def _units(value: Any) -> int:
    """A resource limit as a whole number (Quantity.AsInt64), 0 when it is not one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def _launcher_template(
    template: dict[str, Any], spec: dict[str, Any], conv: Conversion
) -> dict[str, Any]:
    launcher = copy.deepcopy(template)
    main = launcher["spec"]["containers"][0]
    resources = main.get("resources")
    if isinstance(resources, dict) and ("limits" in resources or "requests" in resources):
        resources.pop("limits", None)
        resources.pop("requests", None)
        if not resources:
            del main["resources"]
        conv.carried(
            "spec.template.spec.containers[0].resources",
            f"{WORKERS}.template.spec.containers[0].resources",
            "the workers' only: v1alpha1 ran the launcher without limits and requests",
        )
    if spec.get("launcherOnMaster") is True:
        pod = launcher["spec"]
        pod["tolerations"] = [{"key": MASTER_ROLE, "effect": "NoSchedule"}]
        requirement = {"key": MASTER_ROLE, "operator": "Exists"}
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [requirement]}]
                }
            }
        }
        conv.carried(
            "spec.launcherOnMaster",
            f"{LAUNCHER}.template.spec",
            "as the toleration and node affinity v1alpha1 gave the launcher",
            True,
        )
    return launcher


def _worker_template(
    template: dict[str, Any], resource: str, per_worker: int, conv: Conversion
) -> dict[str, Any]:
    worker = copy.deepcopy(template)
    main = worker["spec"]["containers"][0]
    for key in ("command", "args"):
        if key in main:
            conv.decide(
                f"spec.template.spec.containers[0].{key}",
                f"{LAUNCHER}.template.spec.containers[0].{key}",
                main.pop(key),
                "the launcher's only: v1alpha1's workers ran `sleep 365d`, v2beta1's run "
                "the image's entrypoint, which must start the SSH server",
            )
    if per_worker > 0:
        resources = main.setdefault("resources", {})
        resources.setdefault("limits", {})[resource] = per_worker
    return worker
