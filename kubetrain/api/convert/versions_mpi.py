"""MPIJob ``kubeflow.org/v1alpha1``, ``v1alpha2`` and ``v1`` -> ``kubeflow.org/v2beta1``.

From mpi-operator's Go types and controllers at v0.2.0-v0.3.0
(``pkg/apis/kubeflow/<version>/types.go``, ``pkg/controllers/<version>/``):

- v1alpha1 had no replica specs: one ``template`` for the launcher and the workers, the
  workers counted by ``replicas`` or allocated from ``gpus`` / ``processingUnits`` (at most
  ``gpusPerNode`` / ``processingUnitsPerNode`` per worker, the operator's
  ``--gpus-per-node`` / ``--processing-units-per-node`` flags, default 1, when unset), and
  ``backoffLimit``, ``activeDeadlineSeconds``, ``slotsPerWorker``, ``launcherOnMaster``,
  ``processingResourceType``. The converter builds what the v1alpha1 controller built
  (``allocateProcessingUnits``, ``newLauncher``, ``newWorker``, ``newConfigMap``).
- v1alpha2: ``slotsPerWorker``, ``backoffLimit``, ``activeDeadlineSeconds``,
  ``cleanPodPolicy``, ``mpiReplicaSpecs``, then (v0.2.3) ``mainContainer``, ``runPolicy``
  and (v0.3.0) ``mpiDistribution``. Its controller read ``runPolicy.backoffLimit`` and
  ``runPolicy.activeDeadlineSeconds`` over the top-level ones, and only the top-level
  ``cleanPodPolicy``.
- v1: ``slotsPerWorker``, ``cleanPodPolicy``, ``mpiReplicaSpecs``, ``mainContainer``,
  ``runPolicy`` (no ``mpiDistribution``); its controller read only the top-level
  ``cleanPodPolicy``, and defaulted both replica types' ``restartPolicy`` to ``Never``.
"""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api.convert.moves import (
    containers_of,
    drop_unknown,
    into_run_policy,
    old_default,
    replica_specs,
    source_name,
    start,
)
from kubetrain.api.convert.report import Conversion
from kubetrain.api.convert.versions_mpi_v1alpha1 import LAUNCHER, from_v1alpha1
from kubetrain.api.kinds import MPI

SPEC_FIELDS: dict[str, tuple[str, ...]] = {
    "v1alpha1": (
        "gpus",
        "gpusPerNode",
        "processingUnits",
        "processingUnitsPerNode",
        "processingResourceType",
        "slotsPerWorker",
        "launcherOnMaster",
        "backoffLimit",
        "activeDeadlineSeconds",
        "replicas",
        "template",
    ),
    "v1alpha2": (
        "slotsPerWorker",
        "backoffLimit",
        "activeDeadlineSeconds",
        "cleanPodPolicy",
        "mpiReplicaSpecs",
        "mainContainer",
        "runPolicy",
        "mpiDistribution",
    ),
    "v1": ("slotsPerWorker", "cleanPodPolicy", "mpiReplicaSpecs", "mainContainer", "runPolicy"),
}
#: v1alpha2's ``mpiDistribution`` -> v2beta1's ``mpiImplementation``.
IMPLEMENTATIONS = {"OpenMPI": "OpenMPI", "IntelMPI": "Intel", "MPICH": "MPICH"}
SSH_NOTE = (
    "v2beta1's launcher reaches the workers over SSH, not kubectl exec: the worker image "
    "must run an SSH server (mpi-operator's images since v0.3.0 do)"
)


def convert_mpi(wire: dict[str, Any], version: str, conv: Conversion) -> None:
    """Fill ``conv.output`` with ``wire`` (an MPIJob of ``version``, its ``spec`` a
    mapping) as a ``kubeflow.org/v2beta1`` MPIJob; :class:`JobValidationError` where the
    old operator would have refused the job too (say, 12 GPUs at 8 per node)."""
    where = source_name(MPI, version)
    out = start(wire, MPI, version, conv)
    spec: dict[str, Any] = wire["spec"]
    drop_unknown(conv, spec, SPEC_FIELDS[version], "spec", where)
    if version == "v1alpha1":
        out["spec"] = from_v1alpha1(spec, conv)
    else:
        out["spec"] = _from_replica_specs(spec, version, where, conv)
    conv.decide("spec", None, None, SSH_NOTE)
    conv.output = out


# --- v1alpha2 and v1 ------------------------------------------------------------------------


def _from_replica_specs(
    spec: dict[str, Any], version: str, where: str, conv: Conversion
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "slotsPerWorker" in spec:
        out["slotsPerWorker"] = spec["slotsPerWorker"]
        conv.carried(
            "spec.slotsPerWorker", "spec.slotsPerWorker", "unchanged", spec["slotsPerWorker"]
        )
    if "mpiReplicaSpecs" in spec:
        specs = replica_specs(conv, spec["mpiReplicaSpecs"], "spec.mpiReplicaSpecs", where)
        _launcher_restart_policy(specs, version, conv)
        out["mpiReplicaSpecs"] = specs
    out["runPolicy"] = _run_policy(spec, version, where, conv)
    if "mainContainer" in spec:
        _main_container(spec, conv)
    if version == "v1alpha2" and "mpiDistribution" in spec:
        value = spec["mpiDistribution"]
        implementation = IMPLEMENTATIONS.get(value) if isinstance(value, str) else None
        if implementation is None:
            conv.decide(
                "spec.mpiDistribution",
                "spec.mpiImplementation",
                value,
                "not OpenMPI, IntelMPI or MPICH: the v1alpha2 operator ran it as OpenMPI",
            )
            implementation = "OpenMPI"
        else:
            conv.carried(
                "spec.mpiDistribution", "spec.mpiImplementation", f"as {implementation}", value
            )
        out["mpiImplementation"] = implementation
    return out


def _run_policy(spec: dict[str, Any], version: str, where: str, conv: Conversion) -> Any:
    given = spec.get("runPolicy")
    if given is not None and not isinstance(given, dict):
        return copy.deepcopy(given)  # for validation to name
    run_policy: dict[str, Any] = copy.deepcopy(given) if given else {}
    read = ("backoffLimit", "activeDeadlineSeconds") if version == "v1alpha2" else ()
    for key, value in (given or {}).items():
        if key == "cleanPodPolicy":
            continue
        conv.carried(f"spec.runPolicy.{key}", f"spec.runPolicy.{key}", "unchanged", value)
        if key not in read:
            conv.decide(
                f"spec.runPolicy.{key}",
                f"spec.runPolicy.{key}",
                value,
                f"{where}'s controller did not read it; v2beta1's does",
            )
    for key in ("backoffLimit", "activeDeadlineSeconds"):
        if key not in spec:
            continue
        if key in run_policy and run_policy[key] != spec[key]:
            conv.dropped(
                f"spec.{key}",
                spec[key],
                f"spec.runPolicy.{key} ({run_policy[key]}) took precedence in {where}",
            )
        else:
            into_run_policy(conv, run_policy, key, spec[key])
    # The controllers of both versions read only the top-level policy (default None).
    nested = run_policy.pop("cleanPodPolicy", None)
    if "cleanPodPolicy" in spec:
        into_run_policy(conv, run_policy, "cleanPodPolicy", spec["cleanPodPolicy"])
    else:
        old_default(
            conv,
            run_policy,
            "cleanPodPolicy",
            "None",
            f"{where} defaulted it to None, kubetrain's unset policy stops the pods still active",
        )
    if nested is not None and nested != run_policy["cleanPodPolicy"]:
        conv.dropped(
            "spec.runPolicy.cleanPodPolicy",
            nested,
            f"{where}'s controller ignored it for spec.cleanPodPolicy "
            f"({run_policy['cleanPodPolicy']})",
        )
    return run_policy


def _launcher_restart_policy(specs: Any, version: str, conv: Conversion) -> None:
    launcher = specs.get("Launcher") if isinstance(specs, dict) else None
    if not isinstance(launcher, dict):
        return
    policy = launcher.get("restartPolicy")
    if version == "v1" and policy is None:
        launcher["restartPolicy"] = "Never"
        conv.decide(
            f"{LAUNCHER}.restartPolicy",
            f"{LAUNCHER}.restartPolicy",
            "Never",
            "unset: v1 defaulted it to Never, v2beta1 to OnFailure; written as Never so "
            "the launcher keeps its old behaviour",
        )
    elif version == "v1alpha2" and policy is not None and policy not in ("Never", "OnFailure"):
        launcher["restartPolicy"] = "OnFailure"
        conv.decide(
            f"{LAUNCHER}.restartPolicy",
            f"{LAUNCHER}.restartPolicy",
            policy,
            "v1alpha2 ran any launcher policy but Never as OnFailure: written as OnFailure",
        )


def _main_container(spec: dict[str, Any], conv: Conversion) -> None:
    name = spec["mainContainer"]
    workers = spec.get("mpiReplicaSpecs", {})
    worker = workers.get("Worker") if isinstance(workers, dict) else None
    containers = containers_of(worker.get("template") if isinstance(worker, dict) else None)
    first = containers[0].get("name") if containers and isinstance(containers[0], dict) else None
    if name == first:
        conv.decide(
            "spec.mainContainer",
            None,
            name,
            "v2beta1 has no mainContainer; it is the first container, where ranks start anyway",
        )
    else:
        conv.dropped(
            "spec.mainContainer",
            name,
            "v2beta1 has no mainContainer: ranks start over SSH in the worker's SSH "
            "server, so put the MPI container first and run sshd in it",
        )
