"""The job kinds kubetrain serves, each described once: group, version, plural, the
``operator-name`` upstream's controllers put on children, the replica types in start
order, the main container and its port. Every other module (CRD generation, the loader,
the operator's resources and RBAC, the constructs, the local runner) reads these rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class KindInfo:
    """One kind's wire identity and the facts its tooling shares."""

    kind: str
    #: A short lowercase name (``pytorch``, ``tf``, ``mpi``) for identifiers.
    short: str
    group: str
    version: str
    plural: str
    singular: str
    #: Value of ``training.kubeflow.org/operator-name`` on children (upstream's).
    operator_name: str
    #: Wire field of ``spec`` holding the replica specs.
    replica_specs_field: str
    #: Replica types in canonical spelling, leaders first (the order pods start in).
    replica_types: tuple[str, ...]
    #: The container upstream requires in every replica and injects into, if any.
    main_container: str | None = None
    #: Named port of the main container, and its default number.
    port_name: str | None = None
    default_port: int | None = None
    #: (replica type, restart policy when its spec gives none), upstream's defaults.
    default_restart_policies: tuple[tuple[str, str], ...] = ()
    #: Replica type exposed through the scale subresource, if any.
    scale_replica_type: str | None = None
    #: Whether upstream accepts replica types in any letter case (and normalises them).
    case_insensitive_replica_types: bool = False
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    def default_restart_policy(self, replica_type: str) -> str:
        """The restart policy a replica of ``replica_type`` gets when it states none."""
        return dict(self.default_restart_policies).get(replica_type, "Never")


PYTORCH = KindInfo(
    kind="PyTorchJob",
    short="pytorch",
    group="kubeflow.org",
    version="v1",
    plural="pytorchjobs",
    singular="pytorchjob",
    operator_name="pytorchjob-controller",
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    main_container="pytorch",
    port_name="pytorchjob-port",
    default_port=23456,
    default_restart_policies=(("Master", "OnFailure"), ("Worker", "OnFailure")),
    scale_replica_type="Worker",
)
TENSORFLOW = KindInfo(
    kind="TFJob",
    short="tf",
    group="kubeflow.org",
    version="v1",
    plural="tfjobs",
    singular="tfjob",
    operator_name="tfjob-controller",
    replica_specs_field="tfReplicaSpecs",
    replica_types=("Chief", "Master", "PS", "Worker", "Evaluator"),
    main_container="tensorflow",
    port_name="tfjob-port",
    default_port=2222,
    default_restart_policies=tuple(
        (t, "Never") for t in ("Chief", "Master", "PS", "Worker", "Evaluator")
    ),
    case_insensitive_replica_types=True,
)
XGBOOST = KindInfo(
    kind="XGBoostJob",
    short="xgboost",
    group="kubeflow.org",
    version="v1",
    plural="xgboostjobs",
    singular="xgboostjob",
    operator_name="xgboostjob-controller",
    replica_specs_field="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    main_container="xgboost",
    port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policies=(("Master", "Never"), ("Worker", "Never")),
)
MPI = KindInfo(
    kind="MPIJob",
    short="mpi",
    group="kubeflow.org",
    version="v2beta1",
    plural="mpijobs",
    singular="mpijob",
    operator_name="mpi-operator",
    replica_specs_field="mpiReplicaSpecs",
    replica_types=("Launcher", "Worker"),
    default_restart_policies=(("Launcher", "OnFailure"), ("Worker", "Never")),
)

#: Every served kind by name, in the order kubetrain lists them.
KINDS: Mapping[str, KindInfo] = {k.kind: k for k in (PYTORCH, TENSORFLOW, MPI, XGBOOST)}
JOB_KINDS: tuple[str, ...] = tuple(KINDS)


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
