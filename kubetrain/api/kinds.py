"""The kinds table: the kinds kubetrain serves, each described once by a row
(:class:`~kubetrain.api.kind_info.KindInfo`: group, version, plural, the ``operator-name``
upstream's controllers put on children, the replica types in start order, the main
container and its port). A Kubeflow v1 job kind's row lives in its own module
(``kubetrain/api/<kind>.py``) with its model, rules and defaults, and is listed here once;
every other module (CRD generation, the loader, the defaulter, the operator's plugins and
RBAC, the constructs, the local runner) iterates this table.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubetrain.api.jax import JOB_KIND as JAX_KIND
from kubetrain.api.job_kind import JobKind
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.mpi import JOB_KIND as MPI_KIND
from kubetrain.api.paddle import JOB_KIND as PADDLE_KIND
from kubetrain.api.pytorch import JOB_KIND as PYTORCH_KIND
from kubetrain.api.tensorflow import JOB_KIND as TENSORFLOW_KIND
from kubetrain.api.xgboost import JOB_KIND as XGBOOST_KIND

#: The Kubeflow v1 job kinds, each declared by its own module (its row, model, rules and
#: defaults), in the order kubetrain lists them. Adding a kind is its module and one entry
#: here.
V1_KINDS: tuple[JobKind, ...] = (
    PYTORCH_KIND,
    TENSORFLOW_KIND,
    MPI_KIND,
    PADDLE_KIND,
    JAX_KIND,
    XGBOOST_KIND,
)

PYTORCH, TENSORFLOW, MPI = PYTORCH_KIND.info, TENSORFLOW_KIND.info, MPI_KIND.info

#: Every served v1 kind by name, in the order kubetrain lists them.
KINDS: Mapping[str, KindInfo] = {k.info.kind: k.info for k in V1_KINDS}
JOB_KINDS: tuple[str, ...] = tuple(KINDS)
#: What each v1 kind's module declares, by kind.
JOB_KIND_APIS: Mapping[str, JobKind] = {k.info.kind: k for k in V1_KINDS}

#: Replica types of each kind, in their canonical spelling.
REPLICA_TYPES: Mapping[str, tuple[str, ...]] = {k: i.replica_types for k, i in KINDS.items()}
#: Kinds whose replica types upstream accepts in any letter case and normalises
#: (training-operator's TFJob defaulter; its PyTorchJob webhook refuses other spellings).
CASE_INSENSITIVE_KINDS = frozenset(k for k, i in KINDS.items() if i.case_insensitive_replica_types)
#: Wire field holding each kind's replica specs.
REPLICA_FIELDS: Mapping[str, str] = {k: i.replica_specs_field for k, i in KINDS.items()}


# -- Kubeflow Trainer v2 (kubetrain.api.trainer) -----------------------------------------------


#: Trainer's kinds are described by the same row type (no replica specs of their own: a
#: TrainJob's pods come from its runtime's replicated jobs).
TrainerKindInfo = KindInfo


TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
TRAINJOB = KindInfo(
    kind="TrainJob",
    short="trainjob",
    group=TRAINER_GROUP,
    version=TRAINER_VERSION,
    plural="trainjobs",
    singular="trainjob",
    # kubetrain's children of a TrainJob carry this operator-name (upstream's Trainer
    # labels its children through JobSet instead; kubetrain adds JobSet's labels too).
    operator_name="trainjob-controller",
    replica_specs_field="",
    replica_types=(),
    main_container="node",
)
TRAINING_RUNTIME = KindInfo(
    kind="TrainingRuntime",
    short="trainingruntime",
    group=TRAINER_GROUP,
    version=TRAINER_VERSION,
    plural="trainingruntimes",
    singular="trainingruntime",
    operator_name="",
    replica_specs_field="",
    replica_types=(),
)
CLUSTER_TRAINING_RUNTIME = KindInfo(
    kind="ClusterTrainingRuntime",
    short="clustertrainingruntime",
    group=TRAINER_GROUP,
    version=TRAINER_VERSION,
    plural="clustertrainingruntimes",
    singular="clustertrainingruntime",
    operator_name="",
    replica_specs_field="",
    replica_types=(),
    namespaced=False,
)
#: The Trainer kinds by name, in the order kubetrain lists them (served by their own CRDs;
#: the operator's support for them is separate from the job kinds').
TRAINER_KIND_INFOS: Mapping[str, TrainerKindInfo] = {
    k.kind: k for k in (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)
}
TRAINER_KINDS: tuple[str, ...] = tuple(TRAINER_KIND_INFOS)


#: Every kind the operator reconciles: the v1 job kinds and the TrainJob.
OPERATOR_KINDS: Mapping[str, KindInfo] = {**KINDS, TRAINJOB.kind: TRAINJOB}


def kind_info(kind: str) -> KindInfo:
    """The row of a kind the operator reconciles; ValueError naming the kinds that exist."""
    try:
        return OPERATOR_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"kind {kind!r} is not served: expected one of {', '.join(OPERATOR_KINDS)}"
        ) from None


def by_operator_name(value: str) -> KindInfo | None:
    """The kind whose children carry ``operator-name: value``."""
    return next((k for k in OPERATOR_KINDS.values() if k.operator_name == value), None)
