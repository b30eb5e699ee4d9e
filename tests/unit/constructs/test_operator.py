"""TrainingOperator: least-privilege RBAC, a hardened Deployment and flags that round-trip."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from kubetrain.constructs.objects import manifests
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.types import Image
from kubetrain.controller.config import LogLevel, OperatorConfig
from kubetrain.manifest import dump_all
from tests.k8s_schema import assert_valid
from tests.snapshot import assert_snapshot

IMAGE = Image("ghcr.io/kubetrain/operator:0.1.0")


def synth(**props: Any) -> list[dict[str, Any]]:
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "test", disable_resource_name_hashes=True)
    TrainingOperator(chart, "Operator", TrainingOperatorProps(image=IMAGE, **props))
    return manifests(chart)


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = by_kind(objs, kind)
    return obj


def test_default_objects_and_schema() -> None:
    objs = synth()
    assert [o["kind"] for o in objs] == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Deployment",
        "Service",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "NetworkPolicy",
    ]
    assert_valid(objs)
    assert_snapshot("constructs/operator-default.yaml", dump_all(objs))


def test_namespace_is_pod_security_restricted() -> None:
    labels = one(synth(), "Namespace")["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


#: The v1 job kinds' plurals, in the kinds table's order (written out: the test states the
#: exact rules).
JOBS = ("pytorchjobs", "tfjobs", "mpijobs", "paddlejobs", "jaxjobs", "xgboostjobs")


def test_cluster_role_rules_exactly() -> None:
    rules = one(synth(), "ClusterRole")["rules"]
    table = {(tuple(r["apiGroups"]), tuple(r["resources"])): tuple(r["verbs"]) for r in rules}
    watched = ("get", "list", "watch")
    assert table == {
        (("kubeflow.org",), JOBS): (*watched, "delete"),
        (
            ("kubeflow.org",),
            tuple(f"{plural}/status" for plural in JOBS),
        ): ("patch",),
        (("kubeflow.org",), tuple(f"{plural}/finalizers" for plural in JOBS)): ("update",),
        # patch: lifting the startup gate of an MPI launcher's pod (a JSON patch).
        (("",), ("pods",)): ("create", "delete", *watched, "patch"),
        (("",), ("services",)): ("create", "delete", *watched, "patch"),
        (("",), ("events",)): ("create",),
        (("",), ("configmaps",)): ("create", *watched, "patch"),
        # Secrets: create only. No read of any kind, no update, no delete (GC does it).
        (("",), ("secrets",)): ("create",),
        (("batch",), ("jobs",)): ("create", "delete", *watched),
        # An elastic PyTorchJob's HPA: made, applied, deleted when not wanted any more.
        (("autoscaling",), ("horizontalpodautoscalers",)): ("create", "delete", *watched, "patch"),
        # Kubeflow Trainer v2: TrainJobs as the v1 kinds, and their runtimes read and kept
        # (the in-use finalizer is a JSON patch).
        (("trainer.kubeflow.org",), ("trainjobs",)): (*watched, "delete", "patch"),
        (("trainer.kubeflow.org",), ("trainjobs/status",)): ("patch",),
        (("trainer.kubeflow.org",), ("trainjobs/finalizers",)): ("update",),
        (("trainer.kubeflow.org",), ("trainingruntimes",)): (*watched, "patch"),
        (("trainer.kubeflow.org",), ("clustertrainingruntimes",)): (*watched, "patch"),
        # The progress server: each report's token is checked with a TokenReview.
        (("authentication.k8s.io",), ("tokenreviews",)): ("create",),
        # Lost and unhealthy nodes: read only.
        (("",), ("nodes",)): watched,
    }
    # Nothing is ever PUT but the owner's finalizers (blockOwnerDeletion needs it).
    updated = [r["resources"] for r in rules if "update" in r["verbs"]]
    assert updated == [
        [f"{plural}/finalizers" for plural in JOBS],
        ["trainjobs/finalizers"],
    ]


@pytest.mark.parametrize(
    "config",
    [
        OperatorConfig(),
        OperatorConfig(kinds=("PyTorchJob",)),
        OperatorConfig(namespaces=("team-a",)),
    ],
    ids=["all-kinds", "pytorch-only", "namespaced"],
)
def test_rbac_has_no_wildcards_and_no_exec(config: OperatorConfig) -> None:
    objs = synth(config=config, replicas=2)
    rules = [r for o in objs if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
    assert rules
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert "pods/exec" not in rule["resources"]
        assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"]


def test_pytorch_only_needs_no_mpi_rights() -> None:
    rules = one(synth(config=OperatorConfig(kinds=("PyTorchJob",))), "ClusterRole")["rules"]
    resources = {res for r in rules for res in r["resources"]}
    assert "pytorchjobs" in resources
    assert not resources & {"mpijobs", "tfjobs", "secrets", "jobs"}
    # The progress server's CA bundle, for PyTorchJobs that report progress.
    assert "configmaps" in resources and "tokenreviews" in resources
    off = OperatorConfig(kinds=("PyTorchJob",), progress_server=False)
    rules_off = one(synth(config=off), "ClusterRole")["rules"]
    assert not {res for r in rules_off for res in r["resources"]} & {"configmaps", "tokenreviews"}
    pods = next(r for r in rules if r["resources"] == ["pods"])
    assert "patch" not in pods["verbs"]  # only MPI launchers are ever ungated


def test_hpa_rights_come_only_with_a_kind_that_autoscales() -> None:
    def hpa_rules(kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        rules = one(synth(config=OperatorConfig(kinds=kinds)), "ClusterRole")["rules"]
        return [r for r in rules if "horizontalpodautoscalers" in r["resources"]]

    assert hpa_rules(("TFJob", "MPIJob")) == []
    (rule,) = hpa_rules(("PyTorchJob",))
    assert rule["apiGroups"] == ["autoscaling"]
    assert "update" not in rule["verbs"]  # applied (server-side), never PUT


def test_namespaced_mode_uses_a_role_per_namespace() -> None:
    objs = synth(watch_namespaces=("team-a", "team-b"))
    # Only the cluster-scoped Nodes, ClusterTrainingRuntimes and TokenReviews need a
    # ClusterRole.
    (cluster_role,) = by_kind(objs, "ClusterRole")
    assert [r["resources"] for r in cluster_role["rules"]] == [
        ["nodes"],
        ["clustertrainingruntimes"],
        ["tokenreviews"],
    ]
    assert len(by_kind(objs, "ClusterRoleBinding")) == 1
    assert [r["metadata"]["namespace"] for r in by_kind(objs, "Role")] == [
        "team-a",
        "team-b",
        "kubetrain-system",  # the progress server's certificate Secret
    ]
    bindings = by_kind(objs, "RoleBinding")
    assert [b["metadata"]["namespace"] for b in bindings] == [
        "team-a",
        "team-b",
        "kubetrain-system",
    ]
    assert bindings[0]["subjects"] == [
        {"kind": "ServiceAccount", "name": "kubetrain-operator", "namespace": "kubetrain-system"}
    ]
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert_valid(objs)


def test_the_progress_server_gets_a_service_its_host_and_only_its_own_secret() -> None:
    objs = synth()
    service = named(objs, "Service", "kubetrain-operator-progress")
    assert service["spec"]["ports"] == [
        {"name": "progress", "port": 10443, "targetPort": "progress", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == one(objs, "Deployment")["spec"]["selector"]["matchLabels"]
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    # Pods reach the server by the Service's name, which the certificate names too.
    assert "--progress-host=kubetrain-operator-progress.kubetrain-system.svc" in args
    assert "--progress-server=true" in args
    role = named(objs, "Role", "kubetrain-operator-progress")
    assert role["metadata"]["namespace"] == "kubetrain-system"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get", "update"],
            "resourceNames": ["kubetrain-progress-tls"],
        },
    ]
    policy = named(objs, "ValidatingAdmissionPolicy", "kubetrain-operator-excluded-namespaces")
    kept = policy["spec"]["matchConstraints"]["excludeResourceRules"]
    assert [(r["resources"], r["resourceNames"]) for r in kept] == [
        (["leases"], ["kubetrain-operator"]),
        (["secrets"], ["kubetrain-progress-tls"]),
    ]


def test_no_progress_objects_when_it_is_off() -> None:
    for config in (
        OperatorConfig(progress_server=False),
        OperatorConfig(kinds=("PyTorchJob",), progress_server=False),
    ):
        objs = synth(config=config)
        names = [o["metadata"]["name"] for o in objs]
        assert "kubetrain-operator-progress" not in names
        rules = [r for o in objs if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
        assert not [r for r in rules if "tokenreviews" in r["resources"]]
        assert not [r for r in rules if r.get("resourceNames") == ["kubetrain-progress-tls"]]
        container = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        assert "progress" not in [p["name"] for p in container["ports"]]


def test_deployment_is_hardened() -> None:
    deployment = one(synth(), "Deployment")
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == "ghcr.io/kubetrain/operator:0.1.0"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 8080,
        "health": 8081,
        "progress": 10443,
    }
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "256Mi"},
    }


@pytest.mark.parametrize(
    "config",
    [
        OperatorConfig(),
        OperatorConfig(
            kinds=("MPIJob", "TFJob"),
            namespaces=("a", "b"),
            workers=8,
            kube_api_qps=50.5,
            kube_api_burst=100,
            leader_elect=True,
            leader_election_id="lease-x",
            metrics_port=9090,
            metrics_bind_address="127.0.0.1",
            health_port=9091,
            health_bind_address="::1",
            exclude_namespaces=("kube-system", "platform"),
            startup_timeout_seconds=120,
            success_grace_seconds=5,
            event_qps=2.5,
            log_level=LogLevel.DEBUG,
            progress_server=False,
            progress_port=9443,
            progress_bind_address="127.0.0.1",
            progress_host="progress.example.internal",
            progress_secret="progress-certs",
            progress_api_qps=12.5,
            progress_api_burst=25,
        ),
    ],
    ids=["defaults", "every-field-changed"],
)
def test_flags_round_trip_to_the_operator_config(config: OperatorConfig) -> None:
    container = one(synth(config=config), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["kubetrain", "operator"]
    effective = TrainingOperatorProps(image=IMAGE, config=config).effective_config()
    assert OperatorConfig.from_args(container["args"]) == effective
    # What the construct adds is only the exclusion of its own namespace (cluster-wide).
    added = set(effective.exclude_namespaces) - set(config.exclude_namespaces)
    assert added == ({"kubetrain-system"} if config.cluster_wide else set())


def test_replicas_turn_on_leader_election() -> None:
    objs = synth(replicas=3)
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect=true" in args
    role = next(
        r for r in by_kind(objs, "Role") if r["metadata"]["name"].endswith("leader-election")
    )
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["create", "get", "update"],
        }
    ]
    assert one(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert_valid(objs)


def test_single_replica_does_not_block_drains() -> None:
    objs = synth()
    assert one(objs, "PodDisruptionBudget")["spec"] == {
        "selector": {
            "matchLabels": {
                "app.kubernetes.io/name": "kubetrain-operator",
                "app.kubernetes.io/component": "operator",
            }
        },
        "maxUnavailable": 1,
    }
    assert not [r for r in by_kind(objs, "Role") if "leader" in r["metadata"]["name"]]


def test_network_policies_admit_probes_and_monitoring_and_reach_only_the_api_server() -> None:
    ingress, egress = (o["spec"] for o in by_kind(synth(), "NetworkPolicy"))
    assert ingress["policyTypes"] == ["Ingress"]
    assert ingress["ingress"] == [
        # Probes, and trainer pods' progress reports (each carries a token to check).
        {"ports": [{"port": 8081, "protocol": "TCP"}, {"port": 10443, "protocol": "TCP"}]},
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    }
                }
            ],
            "ports": [{"port": 8080, "protocol": "TCP"}],
        },
    ]
    assert egress["policyTypes"] == ["Egress"]
    assert egress["egress"] == [
        {
            "to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
            "ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}],
        }
    ]
    closed, narrowed = (
        o["spec"]
        for o in by_kind(
            synth(monitoring_namespace=None, api_server_cidrs=("10.0.0.1/32",)), "NetworkPolicy"
        )
    )
    assert closed["ingress"] == [
        {"ports": [{"port": 8081, "protocol": "TCP"}, {"port": 10443, "protocol": "TCP"}]}
    ]
    off = OperatorConfig(progress_server=False)
    (no_progress, _) = (o["spec"] for o in by_kind(synth(config=off), "NetworkPolicy"))
    assert no_progress["ingress"][0] == {"ports": [{"port": 8081, "protocol": "TCP"}]}
    assert narrowed["egress"][0]["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]


def test_the_operator_is_kept_out_of_excluded_namespaces() -> None:
    objs = synth()
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    excluded = "kube-system,kube-public,kube-node-lease,kubetrain-system"
    assert f"--exclude-namespaces={excluded}" in args
    policy = named(objs, "ValidatingAdmissionPolicy", "kubetrain-operator-excluded-namespaces")
    spec = policy["spec"]
    (expression,) = spec["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert expression["values"] == excluded.split(",")
    assert [c["expression"] for c in spec["matchConditions"]] == [
        "request.userInfo.username == 'system:serviceaccount:kubetrain-system:kubetrain-operator'",
        # Cluster-scoped writes are in no namespace (a namespaceSelector never skips them).
        "has(request.namespace) && request.namespace != ''",
    ]
    assert spec["matchConstraints"]["excludeResourceRules"][0]["resources"] == ["leases"]
    binding = named(objs, "ValidatingAdmissionPolicyBinding", policy["metadata"]["name"])
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    namespaced = synth(watch_namespaces=("team-a",))
    assert [p["metadata"]["name"] for p in by_kind(namespaced, "ValidatingAdmissionPolicy")] == [
        "kubetrain-operator-runtimes-in-use"
    ]


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in by_kind(objs, kind) if o["metadata"]["name"] == name]
    return obj


def test_runtimes_in_use_are_protected_while_the_operator_is_deployed() -> None:
    objs = synth(namespace="ops", name="kt")
    policy = named(objs, "ValidatingAdmissionPolicy", "kt-runtimes-in-use")["spec"]
    assert policy["failurePolicy"] == "Ignore"
    assert policy["paramKind"] == {"apiVersion": "apps/v1", "kind": "Deployment"}
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["operations"], rule["resources"]) == (
        ["trainer.kubeflow.org"],
        ["DELETE"],
        ["trainingruntimes", "clustertrainingruntimes"],
    )
    (check,) = policy["validations"]
    assert "'kubetrain.dev/runtime-in-use' in oldObject.metadata.annotations" in check["expression"]
    assert "params.spec.replicas == 0" in check["expression"]
    assert "kept by the kubetrain operator ops/kt" in check["messageExpression"]
    binding = named(objs, "ValidatingAdmissionPolicyBinding", "kt-runtimes-in-use")["spec"]
    # Bound to the operator's own Deployment: gone or scaled to zero, nothing is refused.
    assert binding["paramRef"] == {
        "name": "kt",
        "namespace": "ops",
        "parameterNotFoundAction": "Allow",
    }
    assert one(objs, "Deployment")["metadata"] | {} == {
        **one(objs, "Deployment")["metadata"],
        "name": "kt",
        "namespace": "ops",
    }
    without = synth(config=OperatorConfig(kinds=("PyTorchJob",)))
    assert not [
        p
        for p in by_kind(without, "ValidatingAdmissionPolicy")
        if "runtimes" in p["metadata"]["name"]
    ]


def test_without_namespace_object() -> None:
    assert not by_kind(synth(create_namespace=False), "Namespace")


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"namespace": "Kube_System"}, "namespace ('Kube_System') must be a DNS-1123 label"),
        ({"replicas": 0}, "replicas (0) must be between 1 and 10"),
        (
            {"watch_namespaces": ("a",), "config": OperatorConfig(namespaces=("b",))},
            "watch_namespaces (a) and config.namespaces (b) disagree",
        ),
        ({"node_selector": {"pool": "bad value!"}}, "node_selector['pool'] ('bad value!')"),
        ({"api_server_cidrs": ("10.0.0.300/32",)}, "api_server_cidrs ('10.0.0.300/32')"),
        ({"api_server_ports": (0,)}, "api_server_ports (0) must be ports"),
        ({"monitoring_namespace": "Mon"}, "monitoring_namespace ('Mon')"),
    ],
    ids=[
        "bad-namespace",
        "zero-replicas",
        "namespaces-conflict",
        "bad-node-selector",
        "bad-cidr",
        "bad-port",
        "bad-monitoring-namespace",
    ],
)
def test_fails_on_bad_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        TrainingOperatorProps(image=IMAGE, **props)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("ghcr.io/kubetrain/operator", "is not pinned"),
        ("ghcr.io/kubetrain/operator:latest", "uses ':latest'"),
        ("ghcr.io/Kubetrain/operator:1", "is not a valid image reference"),
    ],
    ids=["untagged", "latest", "uppercase"],
)
def test_fails_on_unpinned_image(reference: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Image(reference)
    assert message in str(caught.value)


def test_accepts_a_digest() -> None:
    digest = "ghcr.io/kubetrain/operator@sha256:" + "a" * 64
    assert str(Image(digest)) == digest


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"kinds": ("NoSuchJob",)}, "kinds (NoSuchJob) must be a non-empty subset"),
        ({"workers": 0}, "workers (0) must be between 1 and 64"),
        ({"metrics_port": 80}, "metrics_port (80) must be between 1024 and 65535"),
        ({"metrics_port": 9000, "health_port": 9000}, "must differ"),
        ({"namespaces": ("a", "a")}, "lists one twice"),
        ({"metrics_bind_address": "localhost"}, "metrics_bind_address ('localhost')"),
        (
            {"namespaces": ("kube-system",)},
            "namespaces and exclude_namespaces both name kube-system",
        ),
        (
            {"progress_port": 8080},
            "metrics_port, health_port and progress_port (8080, 8081, 8080) must differ",
        ),
        ({"progress_port": 443}, "progress_port (443) must be between 1024 and 65535"),
        ({"progress_host": "https://x"}, "progress_host ('https://x') must be a DNS name"),
        ({"progress_secret": "Certs"}, "progress_secret ('Certs') must be a Secret name"),
        ({"progress_bind_address": "any"}, "progress_bind_address ('any') must be an IP"),
        ({"progress_api_qps": 0}, "progress_api_qps (0) must be > 0"),
    ],
    ids=[
        "unknown-kind",
        "zero-workers",
        "privileged-port",
        "same-ports",
        "duplicate-namespace",
        "bad-bind-address",
        "watched-and-excluded",
        "progress-port-taken",
        "progress-port-privileged",
        "progress-host-url",
        "progress-secret-name",
        "progress-bind-address",
        "progress-api-qps",
    ],
)
def test_rejects_bad_operator_config(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        OperatorConfig(**config)
    assert message in str(caught.value)


def test_gang_scheduling_grants_exactly_the_backends_podgroup_rights() -> None:
    from kubetrain.controller.config import GangScheduler
    from kubetrain.controller.rbac import operator_rules

    def podgroup_rules(config: OperatorConfig) -> list[dict[str, list[str]]]:
        return [r.to_wire() for r in operator_rules(config) if "podgroups" in r.resources]

    assert podgroup_rules(OperatorConfig()) == []
    verbs = ["create", "delete", "get", "list", "watch", "patch"]
    coscheduling = OperatorConfig(gang_scheduler=GangScheduler.SCHEDULER_PLUGINS)
    assert podgroup_rules(coscheduling) == [
        {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"], "verbs": verbs}
    ]
    volcano = OperatorConfig(gang_scheduler=GangScheduler.VOLCANO)
    assert podgroup_rules(volcano) == [
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": verbs}
    ]
    # The flags carry it (and a scheduler name only when one is set).
    assert "--gang-scheduler=volcano" in volcano.to_args()
    assert not any(a.startswith("--gang-scheduler-name") for a in volcano.to_args())
    named = OperatorConfig(
        gang_scheduler=GangScheduler.SCHEDULER_PLUGINS, gang_scheduler_name="default-scheduler"
    )
    assert OperatorConfig.from_args(named.to_args()) == named


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"gang_scheduler_name": "gang"},
            "gang_scheduler_name (gang) needs a gang_scheduler (scheduler-plugins or volcano)",
        ),
        (
            {"gang_scheduler": "volcano", "gang_scheduler_name": "Bad Name"},
            "gang_scheduler_name ('Bad Name') must be a scheduler name",
        ),
    ],
)
def test_rejects_a_bad_gang_scheduler_name(config: dict[str, Any], message: str) -> None:
    from kubetrain.controller.config import GangScheduler

    if "gang_scheduler" in config:
        config = {**config, "gang_scheduler": GangScheduler(config["gang_scheduler"])}
    with pytest.raises(ValueError) as caught:
        OperatorConfig(**config)
    assert message in str(caught.value)


TRAINER_MANAGER = {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager"}


def test_found_as_trainer_labels_the_pods_as_trainers_controller_everywhere_they_are_selected() -> (
    None
):
    """The labels tools look for upstream's controller by (the Kubeflow MCP server's
    ``inspect_controller``: name=trainer with component=manager) select the pods in every
    object that selects them, so the Deployment still owns them and the Services, budget
    and network policies still reach them."""
    objs = synth(found_as_trainer=True, replicas=2)
    deployment = one(objs, "Deployment")
    assert deployment["spec"]["selector"] == {"matchLabels": TRAINER_MANAGER}
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert TRAINER_MANAGER.items() <= pod_labels.items()
    assert pod_labels["app.kubernetes.io/part-of"] == "kubetrain"
    assert [s["spec"]["selector"] for s in by_kind(objs, "Service")] == [TRAINER_MANAGER] * 2
    assert one(objs, "PodDisruptionBudget")["spec"]["selector"] == {"matchLabels": TRAINER_MANAGER}
    for policy in by_kind(objs, "NetworkPolicy"):
        assert policy["spec"]["podSelector"] == {"matchLabels": TRAINER_MANAGER}
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["labelSelector"] == {"matchLabels": TRAINER_MANAGER}
    # The names are the operator's own; only the labels are upstream's.
    assert deployment["metadata"]["name"] == "kubetrain-operator"
    assert_valid(objs)


def test_found_as_trainer_needs_an_operator_that_serves_trainjobs() -> None:
    config = OperatorConfig(kinds=("PyTorchJob", "MPIJob"))
    with pytest.raises(ValueError) as raised:
        TrainingOperatorProps(image=IMAGE, config=config, found_as_trainer=True)
    assert str(raised.value) == (
        "found_as_trainer (True) needs an operator that serves TrainJobs, as Trainer's "
        "controller does; config.kinds is PyTorchJob, MPIJob"
    )
