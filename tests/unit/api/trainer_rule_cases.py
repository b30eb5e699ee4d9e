"""One object per Trainer v2 rule that breaks it (and no other rule), and one update per
update rule, shared by the unit tests (``kubetrain validate``'s message) and the
integration tests (the API server's CEL message): both must say the same thing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api.rules import Transition
from kubetrain.api.trainer.invariants import RULES, TRANSITIONS, Rule
from tests.builders.jobs import set_path
from tests.builders.trainer import rjob, runtime, trainjob

RULES_BY_NAME = {rule.name: rule for rule in RULES}
TRANSITIONS_BY_NAME = {rule.name: rule for rule in TRANSITIONS}


@dataclass(frozen=True)
class RuleCase:
    """``obj`` breaks ``rule``; the API server names ``server_field``, and
    ``kubetrain validate`` names ``validate_path``."""

    rule_name: str
    obj: dict[str, Any]
    server_field: str
    validate_path: str

    @property
    def rule(self) -> Rule:
        return RULES_BY_NAME[self.rule_name]


@dataclass(frozen=True)
class UpdateCase:
    """Updating ``old`` to ``new`` breaks the update rule ``rule_name``."""

    id: str
    rule_name: str
    old: dict[str, Any]
    new: dict[str, Any]

    @property
    def rule(self) -> Transition:
        return TRANSITIONS_BY_NAME[self.rule_name]


PATCH_POD = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"


def _patch(containers: list[dict[str, Any]], manager: str = "example.com/team") -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {"template": {"spec": {"containers": containers}}}
                            },
                        }
                    ]
                }
            }
        },
    }


RJOBS = "spec.template.spec.replicatedJobs"

#: An elastic runtime's torch policy: 1 to 3 nodes.
_ELASTIC = {"minNodes": 1, "maxNodes": 3}


def _elastic(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` as the operator records an elastic TrainJob (status.elastic: 1 to 3 nodes)."""
    return set_path(job, "status", {"elastic": _ELASTIC})


CASES: list[RuleCase] = [
    # TrainJob
    RuleCase(
        "trainjob-name-fits",
        # 51 characters + "-launcher-0-0" is 64.
        trainjob("a" * 51),
        "metadata.name",
        "metadata.name",
    ),
    RuleCase(
        "trainjob-runtime-ref",
        trainjob(runtimeRef={"name": "torch-distributed", "kind": "Deployment"}),
        "spec.runtimeRef",
        "spec.runtimeRef",
    ),
    RuleCase(
        "trainjob-managed-by",
        trainjob(managedBy="someone/else"),
        "spec.managedBy",
        "spec.managedBy",
    ),
    RuleCase(
        "trainjob-dataset-storage-uri",
        trainjob(initializer={"dataset": {"storageUri": "tatsu-lab/alpaca"}}),
        "spec.initializer.dataset.storageUri",
        "spec.initializer.dataset.storageUri",
    ),
    RuleCase(
        "trainjob-model-storage-uri",
        trainjob(initializer={"model": {"storageUri": "hf:/meta-llama/Llama-3.2-1B"}}),
        "spec.initializer.model.storageUri",
        "spec.initializer.model.storageUri",
    ),
    RuleCase(
        "trainjob-reserved-env",
        trainjob(
            trainer={"env": [{"name": "A", "value": "1"}, {"name": "PET_NNODES", "value": "8"}]}
        ),
        "spec.trainer.env",
        "spec.trainer.env[1].name",
    ),
    RuleCase(
        "trainjob-nodes-limit",
        trainjob(trainer={"numNodes": 1001}),
        "spec.trainer.numNodes",
        "spec.trainer.numNodes",
    ),
    RuleCase(
        "trainjob-patch-manager",
        trainjob(runtimePatches=[_patch([], manager="platform-team")]),
        "spec.runtimePatches[0].manager",
        "spec.runtimePatches[0].manager",
    ),
    RuleCase(
        "trainjob-patch-env",
        trainjob(runtimePatches=[_patch([{"name": "node", "env": [{"name": "A", "value": "1"}]}])]),
        f"{PATCH_POD}.template.spec.template.spec.containers[0].env",
        f"{PATCH_POD}.template.spec.template.spec.containers[0].env",
    ),
    # TrainingRuntime and ClusterTrainingRuntime
    RuleCase(
        "runtime-one-framework",
        set_path(runtime(), "spec.mlPolicy.mpi", {}),
        "spec.mlPolicy",
        "spec.mlPolicy",
    ),
    RuleCase(
        "runtime-nodes-limit",
        set_path(runtime(kind="TrainingRuntime"), "spec.mlPolicy.numNodes", 1001),
        "spec.mlPolicy.numNodes",
        "spec.mlPolicy.numNodes",
    ),
    RuleCase(
        "runtime-elastic-bounds",
        set_path(runtime(), "spec.mlPolicy.torch", {"elasticPolicy": _ELASTIC | {"minNodes": 4}}),
        "spec.mlPolicy.torch.elasticPolicy",
        "spec.mlPolicy.torch.elasticPolicy",
    ),
    RuleCase(
        "runtime-elastic-nodes-limit",
        set_path(
            runtime(), "spec.mlPolicy.torch", {"elasticPolicy": _ELASTIC | {"maxNodes": 1001}}
        ),
        "spec.mlPolicy.torch.elasticPolicy.maxNodes",
        "spec.mlPolicy.torch.elasticPolicy.maxNodes",
    ),
    RuleCase(
        "runtime-elastic-num-nodes",
        set_path(
            set_path(runtime(), "spec.mlPolicy.torch", {"elasticPolicy": _ELASTIC}),
            "spec.mlPolicy.numNodes",
            4,
        ),
        "spec.mlPolicy.numNodes",
        "spec.mlPolicy.numNodes",
    ),
    RuleCase(
        "runtime-env-injection-not-node",
        set_path(
            runtime(),
            "spec.mlPolicy.torch",
            {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["node"]}]}},
        ),
        "spec.mlPolicy.torch.envInjection.targets[0].containerNames",
        "spec.mlPolicy.torch.envInjection.targets[0].containerNames",
    ),
    RuleCase(
        "runtime-one-pod-group-policy",
        runtime(podGroupPolicy={"coscheduling": {}, "volcano": {}}),
        "spec.podGroupPolicy",
        "spec.podGroupPolicy",
    ),
    RuleCase(
        "runtime-ancestor-replicas",
        runtime(rjobs=[rjob(replicas=2)]),
        f"{RJOBS}[0].replicas",
        f"{RJOBS}[0].replicas",
    ),
    RuleCase(
        "runtime-ancestor-container",
        runtime(kind="TrainingRuntime", rjobs=[rjob(containers=("trainer",))]),
        f"{RJOBS}[0].template.spec.template.spec.containers",
        f"{RJOBS}[0].template.spec.template.spec.containers",
    ),
    RuleCase(
        "runtime-depends-on-earlier",
        # The launcher waits for the node, which is listed after it.
        runtime(
            rjobs=[
                rjob("launcher", dependsOn=[{"name": "node", "status": "Ready"}]),
                rjob("node", step=None),
            ]
        ),
        f"{RJOBS}",
        f"{RJOBS}[0].dependsOn[0].name",
    ),
    RuleCase(
        "runtime-startup-policy-or-depends-on",
        runtime(
            template={
                "spec": {
                    "startupPolicy": {"startupPolicyOrder": "InOrder"},
                    "replicatedJobs": [
                        rjob("node", step=None),
                        rjob("launcher", dependsOn=[{"name": "node", "status": "Ready"}]),
                    ],
                }
            },
        ),
        "spec.template.spec",
        "spec.template.spec",
    ),
    RuleCase(
        "runtime-claim-namespace",
        set_path(
            runtime(),
            "spec.template.spec.volumeClaimPolicies",
            [{"templates": [{"metadata": {"name": "data", "namespace": "other"}}]}],
        ),
        "spec.template.spec.volumeClaimPolicies[0]",
        "spec.template.spec.volumeClaimPolicies[0].templates[0].metadata.namespace",
    ),
]


def _suspended(job: dict[str, Any], value: bool) -> dict[str, Any]:
    return set_path(job, "spec.suspend", value)


_PATCHED = trainjob(runtimePatches=[_patch([{"name": "node"}])])
_REPATCHED = trainjob(runtimePatches=[_patch([{"name": "node"}], manager="example.com/other")])
#: The same patch, its time stamped (the operator stamps times at any time).
_PATCHED_AT = trainjob(
    runtimePatches=[{**_patch([{"name": "node"}]), "time": "2026-01-02T03:04:05Z"}]
)
_PATCHED_LATER = trainjob(
    runtimePatches=[{**_patch([{"name": "node"}]), "time": "2026-01-02T04:00:00Z"}]
)
#: The same manager's patch with other content.
_PATCH_CHANGED = trainjob(
    runtimePatches=[{**_patch([{"name": "node", "env": [{"name": "A", "value": "1"}]}])}]
)
_OVERRIDDEN = trainjob(
    podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"a": "b"}}}]
)

UPDATES: list[UpdateCase] = [
    UpdateCase(
        "runtime-ref-renamed",
        "trainjob-runtime-ref-immutable",
        trainjob(),
        trainjob(runtimeRef={"name": "deepspeed-distributed"}),
    ),
    UpdateCase(
        "runtime-ref-kind",
        "trainjob-runtime-ref-immutable",
        trainjob(),
        trainjob(runtimeRef={"name": "torch-distributed", "kind": "TrainingRuntime"}),
    ),
    UpdateCase(
        "initializer-added",
        "trainjob-initializer-immutable",
        trainjob(),
        trainjob(initializer={"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}}),
    ),
    UpdateCase(
        "trainer-changed",
        "trainjob-trainer-immutable",
        trainjob(trainer={"numNodes": 2}),
        trainjob(trainer={"numNodes": 3}),
    ),
    UpdateCase(
        "trainer-removed",
        "trainjob-trainer-immutable",
        trainjob(trainer={"numNodes": 2}),
        trainjob(),
    ),
    UpdateCase(
        "elastic-trainer-image-changed",
        "trainjob-trainer-immutable",
        _elastic(trainjob(trainer={"numNodes": 2})),
        trainjob(trainer={"numNodes": 3, "image": "other"}),
    ),
    UpdateCase(
        "elastic-nodes-beyond-max",
        "trainjob-elastic-nodes",
        _elastic(trainjob(trainer={"numNodes": 2})),
        trainjob(trainer={"numNodes": 4}),
    ),
    UpdateCase(
        "elastic-nodes-removed",
        "trainjob-elastic-nodes",
        _elastic(trainjob(trainer={"numNodes": 2, "image": "mine"})),
        trainjob(trainer={"image": "mine"}),
    ),
    UpdateCase(
        "deadline-changed",
        "trainjob-deadline-immutable",
        trainjob(activeDeadlineSeconds=60),
        trainjob(activeDeadlineSeconds=120),
    ),
    UpdateCase(
        "managed-by-changed",
        "trainjob-managed-by-immutable",
        trainjob(),
        trainjob(managedBy="kueue.x-k8s.io/multikueue"),
    ),
    UpdateCase(
        "patches-while-running",
        "trainjob-patches-while-suspended",
        _PATCHED,
        _REPATCHED,
    ),
    UpdateCase(
        "patch-content-while-running",
        "trainjob-patches-while-suspended",
        _PATCHED_AT,
        _PATCH_CHANGED,
    ),
    UpdateCase(
        "overrides-while-running",
        "trainjob-overrides-while-suspended",
        trainjob(),
        _OVERRIDDEN,
    ),
]

#: Updates the rules admit: (id, old, new).
ADMITTED_UPDATES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("labels", trainjob(), set_path(trainjob(), "metadata.labels", {"team": "a"})),
    ("suspend", trainjob(), _suspended(trainjob(), True)),
    ("resume", _suspended(trainjob(), True), _suspended(trainjob(), False)),
    # Upstream's CRD writes these defaults; a client writing them back changes nothing.
    (
        "runtime-ref-defaults-written",
        trainjob(),
        trainjob(
            runtimeRef={
                "name": "torch-distributed",
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            }
        ),
    ),
    (
        "managed-by-default-written",
        trainjob(),
        trainjob(managedBy="trainer.kubeflow.org/trainjob-controller"),
    ),
    # An elastic TrainJob is scaled (kubectl scale, an HPA) within its bounds.
    (
        "elastic-scaled-up",
        _elastic(trainjob(trainer={"numNodes": 2, "image": "mine"})),
        trainjob(trainer={"numNodes": 3, "image": "mine"}),
    ),
    ("elastic-nodes-set", _elastic(trainjob()), trainjob(trainer={"numNodes": 1})),
    # Kueue: patches change while the job is suspended, or in the update that resumes it.
    ("patches-while-suspended", _suspended(_PATCHED, True), _suspended(_REPATCHED, True)),
    ("patches-on-resume", _suspended(_PATCHED, True), _suspended(_REPATCHED, False)),
    ("patches-on-suspend", _PATCHED, _suspended(_REPATCHED, True)),
    # runtimePatches' times, stamped by the operator, change at any time.
    ("patch-time-stamped-while-running", _PATCHED, _PATCHED_AT),
    ("patch-time-changed-while-running", _PATCHED_AT, _PATCHED_LATER),
    # Kueue v0.15 writes Trainer v2.1's overrides while the job is suspended, and removes
    # them once it has suspended it again.
    ("overrides-while-suspended", _suspended(trainjob(), True), _suspended(_OVERRIDDEN, True)),
    ("overrides-on-resume", _suspended(_OVERRIDDEN, True), _OVERRIDDEN),
    ("overrides-removed-suspended", _suspended(_OVERRIDDEN, True), _suspended(trainjob(), True)),
]
