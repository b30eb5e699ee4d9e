"""What the CRDs of the Trainer v2 kinds are made of (``kubetrain.api.crds`` generates them
with the Kubeflow v1 kinds', through ``kubetrain.api.crd_generator``): one served and stored version
(``v1alpha1``), structural schemas embedding the pinned Kubernetes types (a runtime's
replicated jobs carry the full batch JobTemplateSpec and PodTemplateSpec), CEL rules with
the messages ``kubetrain validate`` gives (``kubetrain.api.trainer.invariants``), printer
columns, and no ``status`` block or empty fields, so that apply-then-diff is empty.
TrainJob has the status subresource; the runtimes have no status.

The schemas carry upstream's defaults (the models' ``StoredDefault`` markers; the list is in
``kubetrain.api.trainer.defaults``), so stored objects read as upstream's do. Two matter
beyond reading: Kueue's TrainJob integration looks the runtime up by ``runtimeRef.apiGroup``
and ``runtimeRef.kind`` when its webhook admits the TrainJob, before any controller could
fill them in, and refuses one without them ("unsupported runtime").
"""

from __future__ import annotations

from kubetrain.api.crd_generator import CrdInfo
from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, TRAINJOB
from kubetrain.api.names import DNS1123_SUBDOMAIN_PATTERN, MAX_SUBDOMAIN
from kubetrain.api.rules import cel_transitions, placed_rules
from kubetrain.api.trainer.constants import FRAMEWORK_LABEL
from kubetrain.api.trainer.invariants import rules_for, transitions_for
from kubetrain.api.trainer.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainer.trainjob import TrainJob, TrainJobStatus

#: ``kubectl get trainjobs``: the runtime, the last condition (upstream's State: empty
#: while the job runs, since kubetrain writes no condition before the terminal one) and
#: the progress the operator writes in kubetrain's status fields.
TRAINJOB_COLUMNS: list[dict[str, str | int]] = [
    {"name": "Runtime", "type": "string", "jsonPath": ".spec.runtimeRef.name"},
    {"name": "State", "type": "string", "jsonPath": ".status.state"},
    {
        "name": "Progress",
        "type": "integer",
        "jsonPath": ".status.trainerStatus.progressPercentage",
        "description": "Percent done, as last reported.",
    },
    {
        "name": "ETA",
        "type": "integer",
        "jsonPath": ".status.trainerStatus.estimatedRemainingSeconds",
        "description": "Seconds left, as last reported.",
    },
    {
        "name": "Ready",
        "type": "integer",
        "jsonPath": ".status.readyNodes",
        "description": "Node pods Ready or Succeeded.",
    },
    {
        "name": "Nodes",
        "type": "integer",
        "jsonPath": ".status.nodes",
        "description": "Node pods the TrainJob runs.",
    },
    {
        "name": "Restarts",
        "type": "integer",
        "jsonPath": ".status.restarts",
        "description": "Pods recreated after a failure.",
    },
    {
        "name": "Step",
        "type": "integer",
        "jsonPath": ".status.kubetrain.progress.step",
        "priority": 1,
    },
    {
        "name": "Goodput",
        "type": "string",
        "jsonPath": ".status.kubetrain.goodput.ratio",
        "priority": 1,
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
#: ``kubectl get (cluster)trainingruntimes``: the framework label the SDK reads and the
#: default node count.
RUNTIME_COLUMNS: list[dict[str, str | int]] = [
    {
        "name": "Framework",
        "type": "string",
        "jsonPath": ".metadata.labels." + FRAMEWORK_LABEL.replace(".", "\\."),
    },
    {"name": "Nodes", "type": "integer", "jsonPath": ".spec.mlPolicy.numNodes"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


#: TrainJob's scale subresource (``kubectl scale trainjob``, an HPA): its node count, the
#: node pods the operator counts, and their selector. Only an elastic TrainJob's node
#: count may change (``trainjob_updates``), and only it has the status selector.
TRAINJOB_SCALE = (
    ("specReplicasPath", ".spec.trainer.numNodes"),
    ("statusReplicasPath", ".status.nodes"),
    ("labelSelectorPath", ".status.selector"),
)

#: The Trainer kinds' rows: TrainJob, TrainingRuntime and ClusterTrainingRuntime.
TRAINER_CRD_INFOS: tuple[CrdInfo, ...] = (
    CrdInfo(
        TrainJob,
        TRAINJOB,
        tuple(TRAINJOB_COLUMNS),
        placed_rules(rules_for, TRAINJOB.kind),
        cel_transitions(transitions_for, TRAINJOB.kind),
        status=TrainJobStatus,
        scale=TRAINJOB_SCALE,
    ),
    *(
        CrdInfo(
            model,
            kind,
            tuple(RUNTIME_COLUMNS),
            placed_rules(rules_for, kind.kind),
            cel_transitions(transitions_for, kind.kind),
            name_pattern=DNS1123_SUBDOMAIN_PATTERN,
            name_max=MAX_SUBDOMAIN,
        )
        for model, kind in (
            (TrainingRuntime, TRAINING_RUNTIME),
            (ClusterTrainingRuntime, CLUSTER_TRAINING_RUNTIME),
        )
    ),
)
