"""Each Trainer v2 rule is stated twice with one message: ``kubetrain validate`` refuses an
object breaking it with the message of the CEL rule the CRD carries at the rule's node (the
API server's side: tests/integration/test_trainer_api_server.py, on the same cases)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import JobValidationError, ReplicaLimits
from kubetrain.api.crd_generator import node_at as _node
from kubetrain.api.crds import crd_for
from kubetrain.api.kinds import TRAINER_KINDS
from kubetrain.api.trainer import load_trainer_object
from kubetrain.api.trainer.invariants import (
    ITEMS,
    RULES,
    TRANSITIONS,
    check_trainer_update,
    nodes_message,
    rules_for,
    transitions_for,
)
from tests.builders.jobs import set_path
from tests.builders.trainer import rjob, runtime, trainjob
from tests.unit.api.trainer_rule_cases import (
    ADMITTED_UPDATES,
    CASES,
    RULES_BY_NAME,
    TRANSITIONS_BY_NAME,
    UPDATES,
    RuleCase,
    UpdateCase,
)

CRDS = {kind: crd_for(kind) for kind in TRAINER_KINDS}


def _root(kind: str, crds: dict[str, dict[str, Any]] = CRDS) -> dict[str, Any]:
    schema: dict[str, Any] = crds[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _errors(obj: dict[str, Any], limits: ReplicaLimits | None = None) -> list[str]:
    with pytest.raises(JobValidationError) as caught:
        if limits:
            load_trainer_object(obj, limits=limits)
        else:
            load_trainer_object(obj)
    return [str(e) for e in caught.value.errors]


def _all_rules(schema: Any) -> list[dict[str, str]]:
    """Every x-kubernetes-validations entry anywhere in ``schema``."""
    found: list[dict[str, str]] = []
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            found.extend(node.get("x-kubernetes-validations", []))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return found


def test_every_rule_and_update_rule_has_a_case() -> None:
    assert sorted(set(RULES_BY_NAME) - {case.rule_name for case in CASES}) == []
    assert sorted(set(TRANSITIONS_BY_NAME) - {case.rule_name for case in UPDATES}) == []


@pytest.mark.parametrize("case", CASES, ids=[case.rule_name for case in CASES])
def test_rejects_with_the_message_of_the_cel_rule_at_its_field(case: RuleCase) -> None:
    errors = _errors(case.obj)
    # The case breaks its rule and no other one.
    assert [e for e in errors if case.rule.message in e] != [], (case.rule.message, errors)
    assert all(e.startswith(f"{case.validate_path}:") for e in errors), errors


@pytest.mark.parametrize("case", CASES, ids=[case.rule_name for case in CASES])
def test_case_is_of_a_kind_the_rule_applies_to(case: RuleCase) -> None:
    assert case.obj["kind"] in case.rule.kinds


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_crd_carries_each_rule_at_its_node(rule: Any) -> None:
    for kind in rule.kinds:
        node = _node(_root(kind), rule.node)
        assert rule.cel_rule().to_schema() in node["x-kubernetes-validations"], kind


def test_crd_rules_are_exactly_the_rules_and_update_rules() -> None:
    for kind in CRDS:
        expected = [r.cel_rule().to_schema() for r in rules_for(kind)]
        expected += [t.cel_rule().to_schema() for t in transitions_for(kind)]
        found = _all_rules(_root(kind))
        assert sorted(map(str, found)) == sorted(map(str, expected)), kind
    # Only TrainJob has update rules, all at its root (they compare with oldSelf).
    root_rules = _root("TrainJob")["x-kubernetes-validations"]
    assert [r for r in root_rules if "oldSelf" in r["rule"]] == [
        t.cel_rule().to_schema() for t in TRANSITIONS
    ]
    assert all(not transitions_for(kind) for kind in ("TrainingRuntime", "ClusterTrainingRuntime"))


def test_runtime_rules_are_on_both_runtime_kinds() -> None:
    runtime_rules = [r for r in RULES if r.name.startswith("runtime-")]
    assert runtime_rules
    for rule in runtime_rules:
        assert rule.kinds == ("TrainingRuntime", "ClusterTrainingRuntime")


def test_rules_on_list_items_name_the_item() -> None:
    # A rule under a list sits on its items, so the server names the item's index.
    item_rules = [r.name for r in RULES if ITEMS in r.node]
    assert set(item_rules) >= {
        "trainjob-patch-env",
        "trainjob-patch-manager",
        "runtime-ancestor-replicas",
        "runtime-ancestor-container",
        "runtime-claim-namespace",
    }


# --- what the rules admit ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        trainjob("a" * 50),  # + "-launcher-0-0" is 63
        trainjob("a" * 47, trainer={"numNodes": 1000}),  # + "-node-0-999" is 58
        trainjob("a" * 39, initializer={"dataset": {"storageUri": "s3://b/p"}}),
        trainjob(initializer={"dataset": {"storageUri": ""}, "model": {"storageUri": "hf://m"}}),
        trainjob(runtimeRef={"name": "mine", "kind": "TrainingRuntime"}),
        trainjob(managedBy="kueue.x-k8s.io/multikueue"),
        trainjob(trainer={"env": [{"name": "PET_EXTRA", "value": "1"}, {"name": "NCCL_DEBUG"}]}),
        set_path(runtime(), "spec.mlPolicy", {"numNodes": 1000}),
        runtime(rjobs=[rjob(replicas=1), rjob("aux", step=None, replicas=3)]),
        runtime(
            rjobs=[
                rjob("dataset-initializer", "dataset-initializer", ("dataset-initializer",)),
                rjob("node", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}]),
            ]
        ),
    ],
    ids=[
        "name-50",
        "name-47-1000-nodes",
        "name-39-dataset",
        "storage-uris",
        "namespaced-runtime",
        "multikueue",
        "unreserved-env",
        "plain-policy-1000-nodes",
        "other-job-replicas",
        "initializer-then-node",
    ],
)
def test_admits(obj: dict[str, Any]) -> None:
    assert load_trainer_object(obj).to_wire() == obj


def test_name_message_says_how_long_it_may_be() -> None:
    (error,) = _errors(trainjob("a" * 52, trainer={"numNodes": 4}))
    assert error.endswith("'" + "a" * 52 + "-launcher-0-0' has 65); use at most 50 characters")
    # Past 100,000 nodes (limits allowing) the last node's hostname is the longest.
    huge = ReplicaLimits(max_replicas_per_type=10**6, max_pods_per_job=2 * 10**6)
    (error,) = _errors(trainjob("a" * 50, trainer={"numNodes": 200000}), huge)
    assert error.endswith("'" + "a" * 50 + "-node-0-199999' has 64); use at most 49 characters")
    # The initializers the TrainJob configures count too.
    (error,) = _errors(trainjob("a" * 40, initializer={"dataset": {}}))
    assert error.endswith("-dataset-initializer-0-0' has 64); use at most 39 characters")


def test_generate_name_is_checked_like_the_server_names_it() -> None:
    job = trainjob()
    job["metadata"] = {"generateName": "b" * 58}
    (error,) = _errors(job)
    # The server keeps 58 characters of the prefix and adds 5.
    assert error.startswith("metadata.name:")
    assert error.endswith("has 76); use a generateName of at most 45 characters")
    job["metadata"] = {"generateName": "b" * 45}
    assert load_trainer_object(job).metadata.generate_name == "b" * 45


def test_node_limit_follows_the_platform_limits() -> None:
    small = ReplicaLimits(max_replicas_per_type=4, max_pods_per_job=8)
    job = trainjob(trainer={"numNodes": 5})
    assert _errors(job, small) == [f"spec.trainer.numNodes: 5 is invalid: {nodes_message(small)}"]
    assert load_trainer_object(set_path(job, "spec.trainer.numNodes", 4), limits=small)
    crds = {kind: crd_for(kind, small) for kind in TRAINER_KINDS}
    for kind, keys in (
        ("TrainJob", ("spec", "trainer")),
        ("TrainingRuntime", ("spec", "mlPolicy")),
    ):
        rules = _node(_root(kind, crds), keys)["x-kubernetes-validations"]
        assert {
            "rule": "!has(self.numNodes) || self.numNodes <= 4",
            "message": nodes_message(small),
            "fieldPath": ".numNodes",
        } in rules


# --- updates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", UPDATES, ids=[case.id for case in UPDATES])
def test_refuses_update(case: UpdateCase) -> None:
    errors = check_trainer_update("TrainJob", case.old, case.new)
    assert [e.expected for e in errors] == [case.rule.message]
    assert errors[0].path == case.rule.field_path.lstrip(".")
    assert "oldSelf" in case.rule.cel


@pytest.mark.parametrize(
    ("old", "new"),
    [(o, n) for _, o, n in ADMITTED_UPDATES],
    ids=[i for i, _, _ in ADMITTED_UPDATES],
)
def test_admits_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert check_trainer_update("TrainJob", old, new) == []


def test_every_update_rule_is_in_the_table() -> None:
    assert {t.name for t in TRANSITIONS} == {t.name for t in transitions_for("TrainJob")}
