"""Kueue quota constructs: a ResourceFlavor derived from a GpuNodePool (labels, taints,
tolerations), ClusterQueue quotas per flavor (``nodes=`` counting the pool's GPUs and
fabric devices), cohort limits and preemption, LocalQueue, WorkloadPriorityClass, the
errors their props raise, and every object valid against the pinned Kueue CRD schemas."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from kubetrain.api import keys as K
from kubetrain.constructs.nccl import NcclProfile
from kubetrain.constructs.node_pool import GpuNodePool, GpuNodePoolProps, Taint
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.queues import (
    API_VERSION,
    BorrowWithinCohort,
    ClusterQueue,
    ClusterQueueProps,
    FlavorQuota,
    LocalQueue,
    LocalQueueProps,
    Preemption,
    QueueingStrategy,
    Quota,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceFlavorProps,
    WithinClusterQueue,
    WorkloadPriorityClass,
    WorkloadPriorityClassProps,
)
from kubetrain.constructs.types import Image, Quantity
from tests.k8s_schema import assert_valid

TUNER = Image("ghcr.io/kubetrain/operator:0.1.0")
H100 = "NVIDIA-H100-80GB-HBM3"


def chart() -> cdk8s.Chart:
    return cdk8s.Chart(cdk8s.App(), "test", disable_resource_name_hashes=True)


def pool(scope: cdk8s.Chart, profile: NcclProfile | None = None, **overrides: Any) -> GpuNodePool:
    props = GpuNodePoolProps(
        name="h100",
        profile=profile or NcclProfile.infiniband(hcas=("ibp",), rdma_resource=("rdma/ib", 1)),
        tuner_image=TUNER,
        gpu_product=H100,
        preflight_nodes=0,
        **overrides,
    )
    return GpuNodePool(scope, "Pool", props)


def kueue_objects(scope: cdk8s.Chart) -> list[dict[str, Any]]:
    return [o for o in manifests(scope) if o["apiVersion"] == API_VERSION]


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


# ResourceFlavor -----------------------------------------------------------------------


def test_flavor_from_a_pool_states_its_labels_and_taints_and_tolerates_them() -> None:
    scope = chart()
    taint = Taint(key="dedicated", value="training", effect="NoSchedule")
    gpu_pool = pool(
        scope,
        node_labels={"cloud.example/pool": "h100"},
        taints=(taint,),
        require_tuned_nodes=True,
    )
    flavor = ResourceFlavor(scope, "Flavor", ResourceFlavorProps(pool=gpu_pool))
    (obj,) = kueue_objects(scope)
    assert obj["kind"] == "ResourceFlavor"
    assert obj["metadata"]["name"] == "h100" == flavor.name
    spec = obj["spec"]
    # Exactly what binding a pod to the pool selects, the node-tuning label included.
    assert spec["nodeLabels"] == gpu_pool.node_selector
    assert spec["nodeLabels"][K.NODE_TUNING_LABEL] == K.NODE_TUNING_OK
    assert spec["nodeTaints"] == [
        {"key": K.GPU_RESOURCE, "effect": "NoSchedule"},
        {"key": "dedicated", "value": "training", "effect": "NoSchedule"},
    ]
    assert spec["tolerations"] == gpu_pool.tolerations
    assert taint.toleration() in spec["tolerations"]
    assert_valid([obj])


def test_flavor_that_does_not_tolerate_leaves_tolerations_to_the_jobs() -> None:
    scope = chart()
    ResourceFlavor(
        scope, "Flavor", ResourceFlavorProps(pool=pool(scope), tolerate_taints=False, name="ib")
    )
    (obj,) = kueue_objects(scope)
    assert obj["metadata"]["name"] == "ib"
    assert "tolerations" not in obj["spec"]
    assert obj["spec"]["nodeTaints"] == [{"key": K.GPU_RESOURCE, "effect": "NoSchedule"}]


def test_flavor_without_a_pool_is_what_its_props_say() -> None:
    scope = chart()
    ResourceFlavor(scope, "Default", ResourceFlavorProps(name="default-flavor"))
    ResourceFlavor(
        scope,
        "Spot",
        ResourceFlavorProps(
            name="spot",
            node_labels={"cloud.example/spot": "true"},
            taints=(Taint(key="spot", effect="NoExecute"),),
        ),
    )
    default, spot = kueue_objects(scope)
    assert default["spec"] == {}
    assert spot["spec"] == {
        "nodeLabels": {"cloud.example/spot": "true"},
        "nodeTaints": [{"key": "spot", "effect": "NoExecute"}],
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoExecute"}],
    }
    assert_valid([default, spot])


@pytest.mark.parametrize(
    ("profile", "per_node"),
    [
        (NcclProfile.infiniband(hcas=("ibp",), rdma_resource=("rdma/ib", 1)), {"rdma/ib": "1"}),
        (
            NcclProfile.efa(instance_type="p5.48xlarge"),
            {"vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi"},
        ),
        (NcclProfile.tcp(), {}),
    ],
    ids=["infiniband", "efa", "tcp"],
)
def test_flavor_counts_the_gpus_and_fabric_devices_of_nodes(
    profile: NcclProfile, per_node: dict[str, str]
) -> None:
    scope = chart()
    flavor = ResourceFlavor(scope, "Flavor", ResourceFlavorProps(pool=pool(scope, profile)))
    resources = {k: v.value for k, v in flavor.node_resources(3).items()}
    expected = {K.GPU_RESOURCE: "24"}
    for name, value in per_node.items():
        number = int(value.rstrip("Mi"))
        expected[name] = f"{number * 3}{value[len(str(number)) :]}"
    assert resources == expected


def test_rejects_flavor_without_name_or_pool() -> None:
    with pytest.raises(ValueError, match=r"name \(None\) is required for a flavor without a pool"):
        ResourceFlavorProps()


def test_rejects_flavor_labels_that_contradict_the_pool() -> None:
    scope = chart()
    with pytest.raises(ValueError) as caught:
        ResourceFlavorProps(pool=pool(scope), node_labels={K.GPU_PRODUCT_LABEL: "A100"})
    assert str(caught.value) == (
        f"node_labels['{K.GPU_PRODUCT_LABEL}'] ('A100') contradicts node pool 'h100', whose "
        f"nodes have '{H100}'"
    )


def test_rejects_flavor_with_more_node_labels_than_kueue_allows() -> None:
    scope = chart()
    labels = {f"example.com/l{i}": "x" for i in range(9)}
    with pytest.raises(ValueError, match=r"flavor 'many' has 9 node labels .*at most 8"):
        ResourceFlavor(scope, "F", ResourceFlavorProps(name="many", node_labels=labels))


@pytest.mark.parametrize("name", ["H100", "-x", "a_b", "x" * 254], ids=str.__len__)
def test_rejects_flavor_name_that_is_not_a_subdomain(name: str) -> None:
    with pytest.raises(ValueError, match=r"name \(.*\) must be a DNS-1123 subdomain"):
        ResourceFlavorProps(name=name)


# ClusterQueue -------------------------------------------------------------------------


def two_flavors(scope: cdk8s.Chart) -> tuple[ResourceFlavor, ResourceFlavor]:
    gpu = ResourceFlavor(scope, "Gpu", ResourceFlavorProps(pool=pool(scope)))
    cpu = ResourceFlavor(scope, "Cpu", ResourceFlavorProps(name="cpu-nodes"))
    return gpu, cpu


def test_cluster_queue_covers_every_resource_of_its_flavors_in_one_group() -> None:
    scope = chart()
    gpu, cpu = two_flavors(scope)
    queue = ClusterQueue(
        scope,
        "Queue",
        ClusterQueueProps(
            name="team-a",
            cohort="gpu",
            quotas=(
                FlavorQuota(
                    flavor=gpu,
                    nodes=4,
                    borrowing_nodes=2,
                    lending_nodes=1,
                    cpu=Quota.of(512),
                    memory=Quota.of("8Ti"),
                ),
                FlavorQuota(
                    flavor=cpu, cpu=Quota.of(64, lending_limit=32), memory=Quota.of("256Gi")
                ),
            ),
            namespaces=("team-a", "team-a-ci"),
        ),
    )
    (obj,) = by_kind(kueue_objects(scope), "ClusterQueue")
    spec = obj["spec"]
    assert spec["cohortName"] == "gpu"
    (group,) = spec["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", K.GPU_RESOURCE, "rdma/ib"]
    assert queue.covered_resources == group["coveredResources"]
    gpu_quotas, cpu_quotas = group["flavors"]
    assert gpu_quotas == {
        "name": "h100",
        "resources": [
            {"name": "cpu", "nominalQuota": "512"},
            {"name": "memory", "nominalQuota": "8Ti"},
            {
                "name": K.GPU_RESOURCE,
                "nominalQuota": "32",
                "borrowingLimit": "16",
                "lendingLimit": "8",
            },
            {"name": "rdma/ib", "nominalQuota": "4", "borrowingLimit": "2", "lendingLimit": "1"},
        ],
    }
    # The CPU flavor gets quota 0 of what it does not provide: Kueue wants every covered
    # resource named by every flavor, in order.
    assert cpu_quotas["name"] == "cpu-nodes"
    assert [r["name"] for r in cpu_quotas["resources"]] == group["coveredResources"]
    assert cpu_quotas["resources"][0] == {"name": "cpu", "nominalQuota": "64", "lendingLimit": "32"}
    assert cpu_quotas["resources"][2] == {"name": K.GPU_RESOURCE, "nominalQuota": "0"}
    assert spec["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": ["team-a", "team-a-ci"],
            }
        ]
    }
    assert spec["preemption"] == {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert_valid(kueue_objects(scope))


def test_cluster_queue_preemption_and_selectors_reach_the_wire() -> None:
    scope = chart()
    gpu, _ = two_flavors(scope)
    ClusterQueue(
        scope,
        "Queue",
        ClusterQueueProps(
            name="research",
            cohort="gpu",
            quotas=(FlavorQuota(flavor=gpu, gpus=Quota.of(8)),),
            preemption=Preemption(
                reclaim_within_cohort=ReclaimWithinCohort.LOWER_PRIORITY,
                borrow_within_cohort=BorrowWithinCohort.LOWER_PRIORITY,
                borrow_max_priority=100,
                within_cluster_queue=WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY,
            ),
            namespace_labels={"example.com/team": "research"},
            queueing_strategy=QueueingStrategy.STRICT_FIFO,
        ),
    )
    (obj,) = by_kind(kueue_objects(scope), "ClusterQueue")
    assert obj["spec"]["preemption"] == {
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        "reclaimWithinCohort": "LowerPriority",
        "withinClusterQueue": "LowerOrNewerEqualPriority",
    }
    assert obj["spec"]["namespaceSelector"] == {"matchLabels": {"example.com/team": "research"}}
    assert obj["spec"]["queueingStrategy"] == "StrictFIFO"
    # Without nodes= only what is given is covered: a queue of GPUs only.
    assert obj["spec"]["resourceGroups"][0]["coveredResources"] == [K.GPU_RESOURCE]
    assert_valid([obj])


def test_cluster_queue_without_namespaces_admits_every_namespace() -> None:
    scope = chart()
    _, cpu = two_flavors(scope)
    ClusterQueue(
        scope,
        "Q",
        ClusterQueueProps(name="all", quotas=(FlavorQuota(flavor=cpu, cpu=Quota.of(8)),)),
    )
    (obj,) = by_kind(kueue_objects(scope), "ClusterQueue")
    # {} selects every namespace; Kueue reads a missing selector as none.
    assert obj["spec"]["namespaceSelector"] == {}
    assert "cohortName" not in obj["spec"]


def test_rejects_limits_without_a_cohort() -> None:
    scope = chart()
    gpu, _ = two_flavors(scope)
    with pytest.raises(ValueError) as caught:
        ClusterQueueProps(
            name="solo", quotas=(FlavorQuota(flavor=gpu, nodes=2, borrowing_nodes=1),)
        )
    assert str(caught.value) == (
        "flavor 'h100' has a borrowing or lending limit but queue 'solo' has no cohort to "
        "borrow from or lend to: set cohort= or drop the limits"
    )


def test_rejects_cohort_preemption_without_a_cohort() -> None:
    with pytest.raises(ValueError, match=r"preemption reclaims or borrows within a cohort"):
        ClusterQueueProps(
            name="solo",
            quotas=(FlavorQuota(flavor="x", gpus=Quota.of(8)),),
            preemption=Preemption(reclaim_within_cohort=ReclaimWithinCohort.ANY),
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"borrow_within_cohort": BorrowWithinCohort.LOWER_PRIORITY},
            "borrow_within_cohort (LowerPriority) needs reclaim_within_cohort other than Never",
        ),
        (
            {"reclaim_within_cohort": ReclaimWithinCohort.ANY, "borrow_max_priority": 10},
            "borrow_max_priority (10) needs borrow_within_cohort=",
        ),
        (
            {"within_cluster_queue": "LowerPriority"},
            "within_cluster_queue ('LowerPriority') must be one of WithinClusterQueue.NEVER",
        ),
    ],
    ids=["borrow-without-reclaim", "threshold-without-borrow", "string-not-enum"],
)
def test_rejects_bad_preemption(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Preemption(**kwargs)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 2, "gpus": Quota.of(16)}, "nodes (2) and gpus are both set"),
        ({"borrowing_nodes": 1}, "borrowing_nodes/lending_nodes need nodes"),
        ({"nodes": 2, "lending_nodes": 3}, "lending_nodes (3) must not exceed nodes (2)"),
        ({"nodes": -1}, "nodes (-1) must be a whole number >= 0"),
        ({"gpus": 8}, "gpus (8) must be a Quota, e.g. Quota.of(8)"),
        ({"extended": {"cpu": Quota.of(1)}}, "extended['cpu'] must be set with the cpu prop"),
    ],
    ids=[
        "nodes-and-gpus",
        "limit-without-nodes",
        "lend-more-than-own",
        "negative",
        "bare-int",
        "cpu-as-extended",
    ],
)
def test_rejects_bad_flavor_quota(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        FlavorQuota(flavor="h100", **kwargs)
    assert message in str(caught.value)


def test_rejects_nodes_on_a_flavor_without_a_pool() -> None:
    scope = chart()
    _, cpu = two_flavors(scope)
    props = ClusterQueueProps(name="q", quotas=(FlavorQuota(flavor=cpu, nodes=2),))
    with pytest.raises(ValueError, match=r"nodes \(2\) needs a flavor made from a GpuNodePool"):
        ClusterQueue(scope, "Q", props)


def test_rejects_nodes_on_a_flavor_named_but_not_resolved() -> None:
    props = ClusterQueueProps(name="q", quotas=(FlavorQuota(flavor="h100", nodes=2),))
    with pytest.raises(ValueError, match=r"needs the ResourceFlavor construct"):
        ClusterQueue(chart(), "Q", props)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quotas": ()}, "must be a non-empty tuple of FlavorQuota"),
        (
            {"quotas": (FlavorQuota(flavor="a", gpus=Quota.of(1)),) * 2},
            "quotas name flavor 'a' twice",
        ),
        ({"cohort": "Gpu"}, "cohort ('Gpu') must be a DNS-1123 subdomain"),
        ({"namespaces": "team-a"}, "namespaces ('team-a') must be a tuple such as ('team-a',)"),
        ({"namespaces": ("Team",)}, "namespaces ('Team') must be a DNS-1123 label"),
    ],
    ids=["no-quota", "flavor-twice", "bad-cohort", "namespaces-string", "bad-namespace"],
)
def test_rejects_bad_cluster_queue(kwargs: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {"name": "q", "quotas": (FlavorQuota(flavor="a", gpus=Quota.of(1)),)}
    with pytest.raises(ValueError) as caught:
        ClusterQueueProps(**{**values, **kwargs})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Quota.of(-1), "nominal ('-1') must not be negative"),
        (lambda: Quota.of(4, lending_limit=8), "lending_limit ('8') must not exceed nominal ('4')"),
        (lambda: Quota.of("lots"), "quantity ('lots') is not a Kubernetes quantity"),
        (lambda: Quota(nominal=8), "nominal (8) must be a Quantity"),  # type: ignore[arg-type]
    ],
    ids=["negative", "lend-more", "not-a-quantity", "not-typed"],
)
def test_rejects_bad_quota(build: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        build()
    assert message in str(caught.value)


def test_quota_compares_quantities_by_value() -> None:
    quota = Quota.of("1Ti", lending_limit="512Gi", borrowing_limit=Quantity("2Ti"))
    assert quota.to_wire("memory") == {
        "name": "memory",
        "nominalQuota": "1Ti",
        "borrowingLimit": "2Ti",
        "lendingLimit": "512Gi",
    }


# LocalQueue and WorkloadPriorityClass ------------------------------------------------


def team_queue(scope: cdk8s.Chart) -> ClusterQueue:
    _, cpu = two_flavors(scope)
    return ClusterQueue(
        scope,
        "Team",
        ClusterQueueProps(
            name="team-a",
            quotas=(FlavorQuota(flavor=cpu, cpu=Quota.of(8)),),
            namespaces=("team-a",),
        ),
    )


def test_local_queue_is_named_default_and_may_create_its_namespace() -> None:
    scope = chart()
    queue = team_queue(scope)
    local = LocalQueue(
        scope,
        "Local",
        LocalQueueProps(
            namespace="team-a",
            cluster_queue=queue,
            create_namespace=True,
            namespace_labels={"example.com/team": "a"},
        ),
    )
    objs = manifests(scope)
    (namespace,) = [o for o in by_kind(objs, "Namespace") if o["metadata"]["name"] == "team-a"]
    (obj,) = by_kind(objs, "LocalQueue")
    assert (local.name, local.namespace) == ("default", "team-a")
    assert obj["metadata"]["name"] == K.KUEUE_DEFAULT_LOCAL_QUEUE
    assert obj["metadata"]["namespace"] == "team-a"
    assert obj["spec"] == {"clusterQueue": "team-a"}
    assert namespace["metadata"]["name"] == "team-a"
    assert namespace["metadata"]["labels"]["example.com/team"] == "a"
    assert_valid([obj, namespace])


def test_rejects_local_queue_in_a_namespace_its_cluster_queue_refuses() -> None:
    scope = chart()
    queue = team_queue(scope)
    with pytest.raises(ValueError) as caught:
        LocalQueueProps(namespace="team-b", cluster_queue=queue)
    assert str(caught.value) == (
        "namespace ('team-b') is not one ClusterQueue 'team-a' admits (team-a): Kueue would "
        "leave the LocalQueue's jobs pending; add it to the ClusterQueue's namespaces"
    )


def test_rejects_namespace_labels_without_creating_the_namespace() -> None:
    with pytest.raises(ValueError, match=r"namespace_labels are set but create_namespace is False"):
        LocalQueueProps(namespace="a", cluster_queue="q", namespace_labels={"x": "y"})


def test_workload_priority_class() -> None:
    scope = chart()
    WorkloadPriorityClass(
        scope, "High", WorkloadPriorityClassProps(name="high", value=10000, description="urgent")
    )
    (obj,) = kueue_objects(scope)
    assert obj["value"] == 10000
    assert obj["description"] == "urgent"
    assert "spec" not in obj
    assert_valid([obj])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"value": 2**31}, "value (2147483648) must fit a 32-bit integer"),
        ({"value": True}, "value (True) must be an integer"),
        ({"description": "x" * 2049}, "description has 2049 characters: at most 2048"),
    ],
    ids=["too-big", "bool", "long-description"],
)
def test_rejects_bad_workload_priority_class(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        WorkloadPriorityClassProps(**{"name": "p", "value": 1, **kwargs})
    assert message in str(caught.value)


def test_schema_check_catches_a_field_kueue_does_not_have() -> None:
    # The validation the tests rely on is real: Kueue's v1beta2 ClusterQueue has no
    # spec.cohort (v1beta1's name), so a construct writing it would fail here.
    scope = chart()
    _, cpu = two_flavors(scope)
    ClusterQueue(
        scope,
        "Q",
        ClusterQueueProps(name="q", cohort="c", quotas=(FlavorQuota(flavor=cpu, cpu=Quota.of(1)),)),
    )
    (obj,) = by_kind(kueue_objects(scope), "ClusterQueue")
    obj["spec"]["cohort"] = obj["spec"].pop("cohortName")
    with pytest.raises(AssertionError, match=r"Additional properties are not allowed \('cohort'"):
        assert_valid([obj])


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("4096Gi", "4Ti"),
        ("20480Mi", "20Gi"),
        ("3744Gi", "3744Gi"),
        ("1536Mi", "1536Mi"),
        ("1000", "1k"),
        ("256", "256"),
        ("0.5", "500m"),
        ("2000m", "2"),
        ("1024", "1024"),
        ("0", "0"),
    ],
)
def test_quotas_are_written_as_the_api_server_stores_them(written: str, stored: str) -> None:
    # Kueue's conversion webhook rewrites quantities in Go's canonical form; writing them
    # so keeps a re-apply of the queues chart a no-op (checked against the real Kueue in
    # tests/integration/test_kueue_queues.py).
    assert Quota.of(written).to_wire("x")["nominalQuota"] == stored
