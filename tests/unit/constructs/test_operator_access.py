"""The operator's access constructs on their own (``OperatorRbac``,
``NamespaceExclusionPolicy``, ``RuntimeProtectionPolicy``): each takes only the inputs it
needs, and gives what ``TrainingOperator`` gives with the same inputs."""

from __future__ import annotations

from typing import Any

import cdk8s
import constructs
import pytest

from kubetrain.constructs import (
    NamespaceExclusionPolicy,
    NamespaceExclusionPolicyProps,
    OperatorRbac,
    OperatorRbacProps,
    RuntimeProtectionPolicy,
    RuntimeProtectionPolicyProps,
    TrainingOperator,
    TrainingOperatorProps,
)
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.types import Image
from kubetrain.controller.config import OperatorConfig

LABELS = {"team": "ml"}


def _chart() -> cdk8s.Chart:
    return cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)


def _operator_objects(config: OperatorConfig, child: str) -> list[dict[str, Any]]:
    chart = _chart()
    props = TrainingOperatorProps(image=Image("example.com/op:1"), config=config)
    operator = TrainingOperator(chart, "Operator", props)
    node = operator.node.find_child(child)
    assert isinstance(node, constructs.Construct)
    return manifests(node)


def test_rbac_alone_equals_the_operators() -> None:
    config = TrainingOperatorProps(
        image=Image("example.com/op:1"), replicas=2, watch_namespaces=("team-a", "team-b")
    ).effective_config()
    chart = _chart()
    labels = {
        "app.kubernetes.io/name": "kubetrain-operator",
        "app.kubernetes.io/component": "operator",
        "app.kubernetes.io/part-of": "kubetrain",
    }
    props = OperatorRbacProps(
        name="kubetrain-operator", namespace="kubetrain-system", config=config, labels=labels
    )
    rbac = OperatorRbac(chart, "Rbac", props)
    assert [child.node.id for child in rbac.node.children] == [
        "Role-team-a",
        "RoleBinding-team-a",
        "Role-team-b",
        "RoleBinding-team-b",
        "ClusterRole",
        "ClusterRoleBinding",
        "LeaderElectionRole",
        "LeaderElectionRoleBinding",
        "ProgressRole",
        "ProgressRoleBinding",
    ]
    assert manifests(rbac) == _operator_objects(config, "Rbac")


def test_rbac_binds_the_service_account_it_names() -> None:
    chart = _chart()
    props = OperatorRbacProps(name="op", namespace="ops", config=OperatorConfig(), labels=LABELS)
    objs = manifests(OperatorRbac(chart, "Rbac", props))
    bindings = [o for o in objs if o["kind"].endswith("Binding")]
    assert bindings
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]
        assert binding["metadata"]["labels"] == LABELS


def test_exclusion_policy_denies_the_named_account_in_the_named_namespaces() -> None:
    props = NamespaceExclusionPolicyProps(
        name="op",
        namespace="ops",
        excluded_namespaces=("kube-system", "ops"),
        lease_name="op-lease",
        secret_name="op-tls",
        labels=LABELS,
    )
    policy, binding = manifests(NamespaceExclusionPolicy(_chart(), "Exclusion", props))
    assert policy["metadata"] == {"name": "op-excluded-namespaces", "labels": LABELS}
    constraints = policy["spec"]["matchConstraints"]
    assert constraints["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "ops",
    ]
    names = [rule["resourceNames"] for rule in constraints["excludeResourceRules"]]
    assert names == [["op-lease"], ["op-tls"]]
    assert policy["spec"]["matchConditions"][0]["expression"] == (
        "request.userInfo.username == 'system:serviceaccount:ops:op'"
    )
    assert binding["spec"] == {
        "policyName": "op-excluded-namespaces",
        "validationActions": ["Deny"],
    }


def test_exclusion_policy_alone_equals_the_operators() -> None:
    config = TrainingOperatorProps(image=Image("example.com/op:1")).effective_config()
    operator_labels = {
        "app.kubernetes.io/name": "kubetrain-operator",
        "app.kubernetes.io/component": "operator",
        "app.kubernetes.io/part-of": "kubetrain",
    }
    props = NamespaceExclusionPolicyProps(
        name="kubetrain-operator",
        namespace="kubetrain-system",
        excluded_namespaces=config.exclude_namespaces,
        lease_name=config.leader_election_id,
        secret_name=config.progress_secret,
        labels=operator_labels,
    )
    alone = manifests(NamespaceExclusionPolicy(_chart(), "ExclusionPolicy", props))
    assert alone == _operator_objects(config, "ExclusionPolicy")


def test_runtime_protection_takes_the_deployment_as_its_parameter() -> None:
    props = RuntimeProtectionPolicyProps(name="op", namespace="ops")
    policy, binding = manifests(RuntimeProtectionPolicy(_chart(), "Protection", props))
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == "op-runtimes-in-use"
    assert binding["spec"]["paramRef"] == {
        "name": "op",
        "namespace": "ops",
        "parameterNotFoundAction": "Allow",
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"excluded_namespaces": ()},
            r"excluded_namespaces \(empty\) must name at least one namespace",
        ),
        (
            {"excluded_namespaces": ("Kube_System",)},
            r"excluded_namespaces \('Kube_System'\) must be a DNS-1123 label",
        ),
        ({"name": "Op"}, r"name \('Op'\) must be a DNS-1123 label"),
    ],
    ids=["no-namespace", "bad-namespace", "bad-name"],
)
def test_rejects_bad_exclusion_props(props: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {
        "name": "op",
        "namespace": "ops",
        "excluded_namespaces": ("kube-system",),
        "lease_name": "op-lease",
        "secret_name": "op-tls",
    }
    with pytest.raises(ValueError, match=message):
        NamespaceExclusionPolicyProps(**{**base, **props})


def test_rejects_bad_rbac_namespace() -> None:
    with pytest.raises(ValueError, match=r"namespace \('Not A Namespace'\)"):
        OperatorRbacProps(name="op", namespace="Not A Namespace", config=OperatorConfig())
