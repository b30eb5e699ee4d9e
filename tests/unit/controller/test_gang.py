"""Gang scheduling, decided by the planner: the PodGroup first and alone, its shape per
backend (minMember, minResources as the scheduler counts requests, schedulingPolicy),
member pods marked, startup gates off, and the PodGroup gone at the end and on suspend."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from kubetrain.controller.config import GangScheduler, OperatorConfig
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.gang import (
    COSCHEDULING,
    VOLCANO,
    GangConfig,
    effective_requests,
    format_quantity,
)
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from tests.builders.observed import NOW, mpi_raw, pod, pytorch_raw

SECRET = {"metadata": {"name": "job-mpi-ssh-x", "uid": "s"}}


def plugins(backend: GangScheduler, name: str = "") -> Any:
    config = OperatorConfig(gang_scheduler=backend, gang_scheduler_name=name)
    return build_registry(("PyTorchJob", "TFJob", "MPIJob"), gang=GangConfig.of(config))


def decide(raw: dict[str, Any], observed: Observed | None = None, **kw: Any) -> Plan:
    registry = plugins(kw.pop("backend", GangScheduler.SCHEDULER_PLUGINS), kw.pop("name", ""))
    return plan(raw, registry[raw["kind"]], observed or Observed(now=NOW), Context(now=NOW))


def gpu_job(**kw: Any) -> dict[str, Any]:
    raw = pytorch_raw(workers=3, **kw)
    for spec in raw["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "limits": {"nvidia.com/gpu": "8"},
            "requests": {"cpu": "1500m", "memory": "16Gi"},
        }
    return raw


def group_of(p: Plan) -> dict[str, Any]:
    (group,) = [o for o in (*p.create, *p.apply) if o["kind"] == "PodGroup"]
    return group


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def observed_group(p: Plan, phase: str | None = None) -> dict[str, Any]:
    group = group_of(p)
    out = {**group, "metadata": {**group["metadata"], "uid": "pg-uid"}}
    out["metadata"]["ownerReferences"] = group["metadata"]["ownerReferences"]
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def test_the_podgroup_comes_first_and_alone() -> None:
    first = decide(gpu_job())
    # Services may go at once; no pod before the PodGroup exists.
    assert kinds(first.create) == ["PodGroup", *["Service"] * 4]
    assert first.requeue_after is not None and first.requeue_after < 1
    group = group_of(first)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["name"] == "job"
    owner = group["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "PyTorchJob" and owner["controller"] is True
    # Four pods of 8 GPUs, 1.5 CPU and 16 GiB each.
    assert group["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "6", "memory": str(64 * 2**30), "nvidia.com/gpu": "32"},
    }
    # Once the PodGroup is observed every pod comes at once (no startup gate: the
    # workers do not wait for the master, which could not be placed without them).
    second = decide(gpu_job(), Observed(now=NOW, pod_groups={"job": observed_group(first)}))
    created = [o for o in second.create if o["kind"] == "Pod"]
    assert sorted(o["metadata"]["name"] for o in created) == [
        "job-master-0",
        "job-worker-0",
        "job-worker-1",
        "job-worker-2",
    ]
    for created_pod in created:
        assert created_pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "job"
        assert created_pod["spec"]["schedulerName"] == COSCHEDULING.scheduler_name
    assert not [o for o in second.apply if o["kind"] == "PodGroup"]


def test_scheduling_policy_shapes_the_podgroup() -> None:
    policy = {
        "schedulingPolicy": {
            "minAvailable": 2,
            "scheduleTimeoutSeconds": 120,
            "queue": "team-a",
            "priorityClass": "training",
        }
    }
    group = group_of(decide(gpu_job(run_policy=policy)))
    # minResources of the first two pods (the master first).
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "3", "memory": str(32 * 2**30), "nvidia.com/gpu": "16"},
        "scheduleTimeoutSeconds": 120,
    }
    volcano = group_of(decide(gpu_job(run_policy=policy), backend=GangScheduler.VOLCANO))
    assert volcano["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert volcano["spec"]["queue"] == "team-a"
    assert volcano["spec"]["priorityClassName"] == "training"
    assert "scheduleTimeoutSeconds" not in volcano["spec"]
    declared = {"schedulingPolicy": {"minResources": {"nvidia.com/gpu": "8"}}}
    assert group_of(decide(gpu_job(run_policy=declared)))["spec"] == {
        "minMember": 4,
        "minResources": {"nvidia.com/gpu": "8"},
    }


def test_volcano_pods_wait_until_the_gang_is_enqueued() -> None:
    first = decide(gpu_job(), backend=GangScheduler.VOLCANO)
    for phase in ("", "Pending"):
        waiting = decide(
            gpu_job(),
            Observed(now=NOW, pod_groups={"job": observed_group(first, phase)}),
            backend=GangScheduler.VOLCANO,
        )
        assert not [o for o in waiting.create if o["kind"] == "Pod"], phase
    enqueued = decide(
        gpu_job(),
        Observed(now=NOW, pod_groups={"job": observed_group(first, "Inqueue")}),
        backend=GangScheduler.VOLCANO,
    )
    created = [o for o in enqueued.create if o["kind"] == "Pod"]
    assert len(created) == 4
    for created_pod in created:
        annotations = created_pod["metadata"]["annotations"]
        assert annotations["scheduling.k8s.io/group-name"] == "job"
        assert annotations["volcano.sh/task-spec"] in ("master", "worker")
        assert created_pod["spec"]["schedulerName"] == VOLCANO.scheduler_name
        assert "scheduling.x-k8s.io/pod-group" not in created_pod["metadata"]["labels"]


def test_a_template_scheduler_name_is_kept_and_the_operators_name_used() -> None:
    raw = gpu_job()
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "mine"
    first = decide(raw, name="default-scheduler")
    second = decide(
        raw,
        Observed(now=NOW, pod_groups={"job": observed_group(first)}),
        name="default-scheduler",
    )
    names = {
        o["metadata"]["name"]: o["spec"]["schedulerName"]
        for o in second.create
        if o["kind"] == "Pod"
    }
    assert names["job-master-0"] == "default-scheduler"
    assert names["job-worker-0"] == "mine"


def test_the_mpi_launcher_is_a_member_and_not_gated() -> None:
    raw = mpi_raw(workers=2)
    raw["status"] = {"sshAuthSecretName": "job-mpi-ssh-x"}
    observed = Observed(now=NOW, secrets={"job-mpi-ssh-x": SECRET})
    first = decide(raw, observed)
    assert not [o for o in first.create if o["kind"] in ("Pod", "Job")]
    assert group_of(first)["spec"]["minMember"] == 3
    observed = Observed(
        now=NOW, secrets={"job-mpi-ssh-x": SECRET}, pod_groups={"job": observed_group(first)}
    )
    second = decide(raw, observed)
    (launcher,) = [o for o in second.create if o["kind"] == "Job"]
    template = launcher["spec"]["template"]
    assert template["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "job"
    # Created with its workers and schedulable at once: a gated launcher could never
    # reach the gang scheduler's Permit stage, and its workers would wait for it forever.
    assert "schedulingGates" not in template["spec"]
    workers = [o for o in second.create if o["kind"] == "Pod"]
    assert len(workers) == 2


def test_an_mpijob_gets_its_secret_and_podgroup_in_the_first_pass() -> None:
    """Under gang scheduling no startup gate waits for anything, and the echoes of the
    operator's own writes wake no job: the first pass creates the SSH Secret (named from
    the uid) and the PodGroup, and asks for the next pass itself, which brings the pods
    (a lost wake-up was seen as MPIJobs never starting in a 10-job burst)."""
    first = decide(mpi_raw(workers=2))
    assert first.status is not None and first.status["sshAuthSecretName"].startswith("job-ssh-")
    assert {o["kind"] for o in first.create} >= {"Secret", "PodGroup"}
    assert not [o for o in first.create if o["kind"] in ("Pod", "Job")]  # held for the group
    assert first.requeue_after is not None and first.requeue_after < 1


def test_without_a_gang_scheduler_nothing_changes() -> None:
    registry = build_registry(("PyTorchJob",))
    p = plan(gpu_job(), registry["PyTorchJob"], Observed(now=NOW), Context(now=NOW))
    assert "PodGroup" not in kinds(p.create)
    # The workers wait for the master (startup gating).
    assert [o["metadata"]["name"] for o in p.create if o["kind"] == "Pod"] == ["job-master-0"]


def test_the_podgroup_goes_at_the_end_and_while_suspended() -> None:
    first = decide(gpu_job())
    group = observed_group(first)
    suspended = decide(
        gpu_job(run_policy={"suspend": True}), Observed(now=NOW, pod_groups={"job": group})
    )
    assert ("PodGroup", "job") in {(r.kind, r.name) for r in suspended.delete}
    done = gpu_job(
        status={
            "conditions": [
                {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}
            ],
            "completionTime": "2026-01-02T11:00:00Z",
        },
        run_policy={"cleanPodPolicy": "None"},
    )
    finished = decide(
        done,
        Observed(
            now=NOW,
            pod_groups={"job": group},
            pods={"job-master-0": pod("job-master-0", "Succeeded")},
        ),
    )
    deleted = {(r.kind, r.name) for r in finished.delete}
    assert ("PodGroup", "job") in deleted
    assert ("Pod", "job-master-0") not in deleted  # cleanPodPolicy None keeps pods


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # Containers sum up.
        (
            {"containers": [{"resources": {"requests": {"cpu": "1"}}}] * 2},
            {"cpu": Decimal(2)},
        ),
        # A limit stands in for a missing request.
        ({"containers": [{"resources": {"limits": {"memory": "1Gi"}}}]}, {"memory": 2**30}),
        # The largest init container wins over a smaller sum.
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
            },
            {"cpu": Decimal(3)},
        ),
        # A restartable init container (a sidecar) runs beside the containers.
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}
                ],
            },
            {"cpu": Decimal("1.5")},
        ),
        # Pod overhead is added.
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "overhead": {"cpu": "250m"},
            },
            {"cpu": Decimal("1.25")},
        ),
    ],
    ids=["sum", "limit", "init", "sidecar", "overhead"],
)
def test_effective_requests_count_as_the_scheduler_does(
    spec: dict[str, Any], expected: dict[str, Decimal]
) -> None:
    assert effective_requests(spec) == expected


def test_quantities_are_written_as_kubernetes_writes_them() -> None:
    assert format_quantity(Decimal(6)) == "6"
    assert format_quantity(Decimal("1.5")) == "1500m"
    assert format_quantity(Decimal("0.0001")) == "1m"
