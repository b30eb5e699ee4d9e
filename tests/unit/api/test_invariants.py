"""Each cross-field invariant is one rule stated twice, with one message: ``kubetrain
validate`` reports a job breaking it with the message of the CEL rule in the CRD (the API
server's side is checked in tests/integration/test_api_server.py on the same cases)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import JobValidationError, ReplicaLimits, crd_for, load_job
from kubetrain.api.crd_generator import VALUES
from kubetrain.api.invariants import (
    INVARIANTS,
    MANAGED_BY_IMMUTABLE,
    TRANSITIONS,
    check_update,
    invariants_for,
)
from kubetrain.api.kinds import JOB_KINDS, KINDS, REPLICA_FIELDS
from kubetrain.api.rules import ROOT, replica_node
from kubetrain.constructs import App, Chart
from kubetrain.constructs.crds import KubeflowCrds, KubeflowCrdsProps
from tests.builders.jobs import mpi_job, pytorch_job, set_path
from tests.unit.api.invariant_cases import CASES, INVARIANTS_BY_NAME, InvariantCase

CRDS = {kind: crd_for(kind) for kind in JOB_KINDS}


def _errors(job: dict[str, Any], limits: ReplicaLimits | None = None) -> list[str]:
    with pytest.raises(JobValidationError) as caught:
        load_job(job, limits=limits) if limits else load_job(job)
    return [str(e) for e in caught.value.errors]


def _cel_rules(crd: dict[str, Any], node: tuple[str, ...]) -> list[dict[str, str]]:
    """The CEL rules at ``node`` of the CRD's schema (a path of property names, VALUES for a
    map's values)."""
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for step in node:
        schema = schema["additionalProperties"] if step == VALUES else schema["properties"][step]
    rules: list[dict[str, str]] = schema["x-kubernetes-validations"]
    return rules


def _both_nodes(crd: dict[str, Any]) -> list[dict[str, str]]:
    """The rules at the root and on each replica spec: where a v1 kind's rules sit."""
    kind = crd["spec"]["names"]["kind"]
    return _cel_rules(crd, ROOT) + _cel_rules(crd, ("spec", REPLICA_FIELDS[kind], VALUES))


def test_every_invariant_has_a_case() -> None:
    missing = sorted(set(INVARIANTS_BY_NAME) - {case.invariant for case in CASES})
    assert missing == [], f"add an InvariantCase for each of: {missing}"


@pytest.mark.parametrize("case", CASES, ids=[case.invariant for case in CASES])
def test_rejects_with_the_message_of_the_cel_rule(case: InvariantCase) -> None:
    errors = _errors(case.job)
    assert any(case.rule.message in error for error in errors), (case.rule.message, errors)


@pytest.mark.parametrize("invariant", INVARIANTS, ids=[i.name for i in INVARIANTS])
def test_crd_carries_each_invariant_where_its_node_says(invariant: Any) -> None:
    (kind,) = invariant.kinds
    assert invariant.node in (ROOT, replica_node(KINDS[kind]))
    rules = _cel_rules(CRDS[kind], invariant.node)
    assert invariant.cel_rule().to_schema() in rules


def test_crd_rules_are_exactly_the_invariants_and_transitions() -> None:
    for kind, crd in CRDS.items():
        expected = {i.message for i in INVARIANTS if kind in i.kinds} | {
            t.message for t in TRANSITIONS if t.kind == kind
        }
        found = {r["message"] for r in _both_nodes(crd)}
        assert found == expected, kind


def test_managed_by_is_immutable() -> None:
    rule = next(t for t in TRANSITIONS if t.kind == "PyTorchJob")
    assert "oldSelf" in rule.cel
    queued = set_path(pytorch_job(), "spec.runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"})
    plain = pytorch_job()
    for old, new in [
        (plain, queued),
        (queued, plain),
        (queued, set_path(queued, "spec.runPolicy.managedBy", "kubeflow.org/training-operator")),
    ]:
        errors = check_update("PyTorchJob", old, new)
        assert [(e.path, e.expected) for e in errors] == [
            ("spec.runPolicy.managedBy", MANAGED_BY_IMMUTABLE)
        ]
    assert check_update("PyTorchJob", queued, set_path(queued, "metadata.labels", {"a": "b"})) == []


@pytest.mark.parametrize(
    "value",
    [
        "kubetrain.dev/operator",
        "kubeflow.org/training-operator",
        "kubeflow.org/mpi-operator",
        "kueue.x-k8s.io/multikueue",
    ],
)
def test_managed_by_accepts_kubetrain_upstream_and_multikueue(value: str) -> None:
    job = load_job(mpi_job(runPolicy={"managedBy": value}))
    assert job.run_policy is not None and job.run_policy.managed_by == value


def test_rejects_empty_managed_by_as_upstream_does() -> None:
    errors = _errors(pytorch_job(runPolicy={"managedBy": ""}))
    assert any(e.startswith('spec.runPolicy.managedBy: "" is invalid') for e in errors), errors


# --- replica limits --------------------------------------------------------------------------

SMALL = ReplicaLimits(max_replicas_per_type=4, max_pods_per_job=6)


def test_limits_are_inclusive() -> None:
    at_limit = set_path(pytorch_job(), "spec.pytorchReplicaSpecs.Worker.replicas", 1000)
    assert load_job(at_limit).summary() == {"Master": 1, "Worker": 1000}
    errors = _errors(set_path(at_limit, "spec.pytorchReplicaSpecs.Worker.replicas", 1001))
    assert errors == [
        "spec.pytorchReplicaSpecs.Worker.replicas: 1001 is invalid: replicas must be at most "
        "1000 per replica type (the cluster's limit, set in the job CRDs by the platform team)"
    ]


def test_custom_limits_reach_validate_and_the_crds_with_one_message() -> None:
    job = set_path(mpi_job(), "spec.mpiReplicaSpecs.Worker.replicas", 4)
    assert load_job(job, limits=SMALL).summary() == {"Launcher": 1, "Worker": 4}
    over = set_path(job, "spec.mpiReplicaSpecs.Worker.replicas", 6)
    errors = _errors(over, SMALL)
    assert any(SMALL.per_type_message() in e for e in errors)
    assert any(SMALL.per_job_message() in e and "7 is invalid" in e for e in errors)
    # The same limits, given to the CRD construct, make the same CEL rules.
    app = App()
    chart = Chart(app, "crds")
    KubeflowCrds(
        chart,
        "Crds",
        KubeflowCrdsProps(kinds=("PyTorchJob", "TFJob", "MPIJob"), replica_limits=SMALL),
    )
    crds = {o["spec"]["names"]["kind"]: o for o in chart.to_json()}
    for kind, crd in crds.items():
        rules = _both_nodes(crd)
        by_message = {r["message"]: r["rule"] for r in rules}
        assert by_message[SMALL.per_type_message()].endswith("self.replicas <= 4"), kind
        assert by_message[SMALL.per_job_message()].endswith(".sum() <= 6"), kind
        expected = {i.cel_rule().to_schema()["rule"] for i in invariants_for(kind, SMALL)}
        assert expected <= set(by_message.values())


@pytest.mark.parametrize(
    ("per_type", "per_job", "fragment"),
    [
        (0, 10, "max_replicas_per_type (0)"),
        (10, 5, "max_pods_per_job (5)"),
        (2**31, 2**31, "int32"),
    ],
)
def test_rejects_bad_limits(per_type: int, per_job: int, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        ReplicaLimits(max_replicas_per_type=per_type, max_pods_per_job=per_job)
