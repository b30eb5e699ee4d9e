"""Label and annotation keys the operator puts on its children, and the values that say
which controller owns them.

The keys (and the ``operator-name`` values) are upstream Kubeflow's, so tools written
for the upstream operators (dashboards, Kueue, ``kubectl -l`` habits) keep working.
The ``kubetrain.dev/`` annotations are kubetrain's own additions.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "training.kubeflow.org"
OPERATOR_NAME = f"{PREFIX}/operator-name"
JOB_NAME = f"{PREFIX}/job-name"
REPLICA_TYPE = f"{PREFIX}/replica-type"
REPLICA_INDEX = f"{PREFIX}/replica-index"
JOB_ROLE = f"{PREFIX}/job-role"

#: ``operator-name`` value per job kind, as the upstream controllers set it.
OPERATOR_NAMES: Mapping[str, str] = {
    "PyTorchJob": "pytorchjob-controller",
    "TFJob": "tfjob-controller",
    "MPIJob": "mpi-operator",
}
KIND_BY_OPERATOR_NAME: Mapping[str, str] = {v: k for k, v in OPERATOR_NAMES.items()}

#: Hash of the desired child, so an unchanged child is not applied again.
SPEC_HASH_ANNOTATION = "kubetrain.dev/spec-hash"
#: Optional per-job override of the operator's startup timeout, in seconds.
STARTUP_TIMEOUT_ANNOTATION = "kubetrain.dev/startup-timeout-seconds"
#: Istio's sidecar switch: sidecars keep training pods from ever completing.
ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject"

#: ``runPolicy.managedBy`` values kubetrain reconciles (absent means kubetrain too):
#: its own, and the upstream operators' (kubetrain is a drop-in replacement).
MANAGED_BY_KUBETRAIN = "kubetrain.dev/operator"
MANAGED_BY_ACCEPTED = frozenset(
    {MANAGED_BY_KUBETRAIN, "kubeflow.org/training-operator", "kubeflow.org/mpi-operator"}
)


def operator_name_selector(kinds: tuple[str, ...]) -> str:
    """The label selector the child informers use: only children of enabled kinds."""
    values = ",".join(sorted(OPERATOR_NAMES[k] for k in kinds))
    return f"{OPERATOR_NAME} in ({values})"


def job_selector(kind: str, job_name: str, replica_type: str | None = None) -> str:
    """The serialized selector of a job's pods (``replicaStatuses[*].selector``)."""
    parts = [f"{JOB_NAME}={job_name}", f"{OPERATOR_NAME}={OPERATOR_NAMES[kind]}"]
    if replica_type is not None:
        parts.append(f"{REPLICA_TYPE}={replica_type.lower()}")
    return ",".join(parts)
