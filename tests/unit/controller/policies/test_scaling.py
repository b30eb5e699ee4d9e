"""An elastic PyTorchJob's HPA (made, applied, deleted as upstream's hpa.go and when the
job no longer needs one) and what a scale of its Workers says: the ScaledUp/ScaledDown
Event, the Running message, new Workers created and the others left alone."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.policies import scaling
from tests.builders import jobs
from tests.builders.observed import JOB_UID, NOW, OBSERVED, pod, stamp

PLUGIN = build_registry(("PyTorchJob",))["PyTorchJob"]
#: Each job a generation of its own: the plugin caches a parsed job by it.
GENERATIONS = itertools.count(100)
CPU_80: dict[str, Any] = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}
RUNNING: dict[str, Any] = {
    "conditions": [
        {"type": "Created", "status": "True", "reason": "PyTorchJobCreated", "message": "c"},
        {
            "type": "Running",
            "status": "True",
            "reason": "PyTorchJobRunning",
            "message": "PyTorchJob job is running.",
            "lastTransitionTime": stamp(60),
        },
    ],
    "startTime": stamp(60),
}


def elastic_raw(
    workers: int,
    *,
    metrics: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
    **policy: Any,
) -> dict[str, Any]:
    """An elastic PyTorchJob (Workers only, 1 to 4) as the informer holds it."""
    elastic: dict[str, Any] = {"minReplicas": 1, "maxReplicas": 4, **policy}
    if metrics is not None:
        elastic["metrics"] = metrics
    raw = jobs.pytorch_job(
        master=False,
        workers=workers,
        restart_policy="OnFailure",
        metadata={**OBSERVED, "resourceVersion": "9", "generation": next(GENERATIONS)},
        elasticPolicy=elastic,
    )
    if status is not None:
        raw["status"] = copy.deepcopy(status)
    return raw


def labels(index: int) -> dict[str, str]:
    return {K.REPLICA_TYPE: "worker", K.REPLICA_INDEX: str(index)}


def worker_service(index: int) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {
            "name": f"job-worker-{index}",
            "namespace": "ns",
            "uid": f"uid-svc-{index}",
            "labels": labels(index),
            "ownerReferences": [{"kind": "PyTorchJob", "uid": JOB_UID, "controller": True}],
        },
    }


def workers(count: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``count`` running Workers: their pods and Services, by name."""
    pods = {f"job-worker-{i}": pod(f"job-worker-{i}", labels=labels(i)) for i in range(count)}
    services = {f"job-worker-{i}": worker_service(i) for i in range(count)}
    return pods, services


def hpa_observed(
    *,
    metrics: list[dict[str, Any]],
    current: int | None = None,
    desired: int | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """The job's HPA as the informer keeps it (trimmed), with a cpu measurement."""
    meta: dict[str, Any] = {
        "name": "job",
        "namespace": "ns",
        "uid": "uid-hpa",
        "ownerReferences": [{"kind": "PyTorchJob", "uid": JOB_UID, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = stamp()
    status: dict[str, Any] = {}
    if desired is not None:
        status["desiredReplicas"] = desired
    if current is not None:
        status["currentMetrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": current}},
            }
        ]
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta,
        "spec": {"metrics": metrics},
        "status": status,
    }


def decide(raw: dict[str, Any], observed: Observed, **ctx: Any) -> Plan:
    return plan(raw, PLUGIN, observed, Context(now=NOW, **ctx))


def created(p: Plan, kind: str) -> list[dict[str, Any]]:
    return [o for o in (*p.create, *p.apply) if o["kind"] == kind]


def running_message(p: Plan) -> str:
    assert p.status is not None
    (running,) = [c for c in p.status["conditions"] if c["type"] == "Running"]
    return str(running["message"])


# -- the HPA ---------------------------------------------------------------------------------


def test_an_elastic_job_with_metrics_owns_an_hpa_over_its_workers() -> None:
    pods, services = workers(2)
    p = decide(elastic_raw(2, metrics=[CPU_80]), Observed(pods=pods, services=services, now=NOW))
    (hpa,) = created(p, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["metadata"]["name"] == "job" and hpa["metadata"]["namespace"] == "ns"
    (owner,) = hpa["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("PyTorchJob", JOB_UID, True)
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "job"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [CPU_80],
    }
    # The job's children are watched by their labels: the HPA carries the job's.
    assert hpa["metadata"]["labels"][K.JOB_NAME] == "job"


def test_the_bounds_default_as_admission_stores_them() -> None:
    raw = elastic_raw(3, metrics=[CPU_80])
    del raw["spec"]["elasticPolicy"]["minReplicas"]
    (hpa,) = created(decide(raw, Observed(now=NOW)), "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (4, 4)


def test_no_metrics_no_hpa_and_one_left_from_before_is_deleted() -> None:
    pods, services = workers(2)
    left = hpa_observed(metrics=[CPU_80])
    observed = Observed(pods=pods, services=services, autoscalers={"job": left}, now=NOW)
    p = decide(elastic_raw(2, status=RUNNING), observed)
    assert created(p, "HorizontalPodAutoscaler") == []
    assert [(r.kind, r.name) for r in p.delete] == [("HorizontalPodAutoscaler", "job")]
    # One already being deleted is not deleted again.
    gone = hpa_observed(metrics=[CPU_80], deleting=True)
    observed = Observed(pods=pods, services=services, autoscalers={"job": gone}, now=NOW)
    assert decide(elastic_raw(2, status=RUNNING), observed).delete == []


def test_changed_metrics_apply_the_hpa_again() -> None:
    pods, services = workers(2)
    first = decide(elastic_raw(2, metrics=[CPU_80]), Observed(now=NOW))
    (hpa,) = created(first, "HorizontalPodAutoscaler")
    observed = Observed(pods=pods, services=services, autoscalers={"job": hpa}, now=NOW)
    same = decide(elastic_raw(2, metrics=[CPU_80], status=RUNNING), observed)
    assert created(same, "HorizontalPodAutoscaler") == []
    cpu_60 = copy.deepcopy(CPU_80)
    cpu_60["resource"]["target"]["averageUtilization"] = 60
    changed = decide(elastic_raw(2, metrics=[cpu_60], status=RUNNING), observed)
    (applied,) = [o for o in changed.apply if o["kind"] == "HorizontalPodAutoscaler"]
    assert applied["spec"]["metrics"] == [cpu_60]


def test_a_suspended_or_finished_job_loses_its_hpa() -> None:
    pods, services = workers(2)
    hpa = hpa_observed(metrics=[CPU_80])
    observed = Observed(pods=pods, services=services, autoscalers={"job": hpa}, now=NOW)
    suspended = elastic_raw(2, metrics=[CPU_80], status=RUNNING)
    suspended["spec"]["runPolicy"] = {"suspend": True}
    assert ("HorizontalPodAutoscaler", "job") in {
        (r.kind, r.name) for r in decide(suspended, observed).delete
    }
    done = copy.deepcopy(RUNNING)
    done["conditions"].append(
        {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "message": "ok"}
    )
    done["completionTime"] = stamp(5)
    finished = decide(elastic_raw(2, metrics=[CPU_80], status=done), observed)
    assert ("HorizontalPodAutoscaler", "job") in {(r.kind, r.name) for r in finished.delete}


# -- a scale ---------------------------------------------------------------------------------


def test_an_hpa_scale_up_adds_workers_and_says_why() -> None:
    pods, services = workers(2)
    hpa = hpa_observed(metrics=[CPU_80], current=91, desired=4)
    observed = Observed(pods=pods, services=services, autoscalers={"job": hpa}, now=NOW)
    p = decide(elastic_raw(4, metrics=[CPU_80], status=RUNNING), observed, seen_scale={"Worker": 2})
    new_pods = sorted(o["metadata"]["name"] for o in p.create if o["kind"] == "Pod")
    assert new_pods == ["job-worker-2", "job-worker-3"]
    # The running Workers are neither rewritten nor deleted.
    assert not [o for o in p.apply if o["kind"] == "Pod"] and p.delete == []
    (event,) = [e for e in p.events if e.reason == "ScaledUp"]
    assert event.message == "2 -> 4 workers (HPA: cpu 91% > 80%)"
    assert (
        running_message(p)
        == "PyTorchJob job is running. ScaledUp: 2 -> 4 workers (HPA: cpu 91% > 80%)"
    )
    assert p.seen_scale == {"Worker": 4, "Worker/waits": 0}


def test_a_scale_waits_for_its_hpa_to_record_the_decision_before_saying_why() -> None:
    # The HPA resizes the job, then writes its status: until then it still shows the
    # measurement from before (11%, under the target), which must not be quoted.
    pods, services = workers(2)
    stale = hpa_observed(metrics=[CPU_80], current=11, desired=2)
    observed = Observed(pods=pods, services=services, autoscalers={"job": stale}, now=NOW)
    raw = elastic_raw(4, metrics=[CPU_80], status=RUNNING)
    p = decide(raw, observed, seen_scale={"Worker": 2})
    assert [e for e in p.events if e.reason.startswith("Scaled")] == []
    assert p.seen_scale == {"Worker": 2, "Worker/waits": 1}
    assert p.requeue_after is not None and p.requeue_after <= scaling.WAIT_SECONDS
    # The new Workers are made at once all the same.
    assert sorted(o["metadata"]["name"] for o in p.create if o["kind"] == "Pod") == [
        "job-worker-2",
        "job-worker-3",
    ]
    fresh = hpa_observed(metrics=[CPU_80], current=91, desired=4)
    observed = Observed(pods=pods, services=services, autoscalers={"job": fresh}, now=NOW)
    p = decide(raw, observed, seen_scale=dict(p.seen_scale))
    (event,) = [e for e in p.events if e.reason == "ScaledUp"]
    assert event.message == "2 -> 4 workers (HPA: cpu 91% > 80%)"


def test_a_change_its_hpa_never_decided_is_the_specs() -> None:
    # kubectl scale beside an HPA: after a few looks the HPA still wants 2.
    pods, services = workers(2)
    hpa = hpa_observed(metrics=[CPU_80], current=40, desired=2)
    observed = Observed(pods=pods, services=services, autoscalers={"job": hpa}, now=NOW)
    raw = elastic_raw(3, metrics=[CPU_80], status=RUNNING)
    memory = {"Worker": 2}
    for _ in range(scaling.MAX_WAITS):
        p = decide(raw, observed, seen_scale=memory)
        assert [e for e in p.events if e.reason.startswith("Scaled")] == []
        memory = dict(p.seen_scale)
    p = decide(raw, observed, seen_scale=memory)
    (event,) = [e for e in p.events if e.reason == "ScaledUp"]
    assert event.message == f"2 -> 3 workers ({scaling.BY_SPEC})"


def test_a_scale_down_by_kubectl_deletes_the_surplus_and_says_so() -> None:
    pods, services = workers(3)
    p = decide(elastic_raw(1, status=RUNNING), Observed(pods=pods, services=services, now=NOW))
    # No memory (an operator that just started): counted from the Workers' Services.
    (event,) = [e for e in p.events if e.reason == "ScaledDown"]
    assert event.message == f"3 -> 1 workers ({scaling.BY_SPEC})"
    deleted = sorted((r.kind, r.name) for r in p.delete)
    assert deleted == [
        ("Pod", "job-worker-1"),
        ("Pod", "job-worker-2"),
        ("Service", "job-worker-1"),
        ("Service", "job-worker-2"),
    ]
    assert "ScaledDown: 3 -> 1 workers" in running_message(p)


def test_the_running_message_keeps_the_last_scale_once_the_workers_run() -> None:
    pods, services = workers(4)
    status = copy.deepcopy(RUNNING)
    note = "ScaledUp: 2 -> 4 workers (HPA: cpu 91% > 80%)"
    status["conditions"][1]["message"] = f"PyTorchJob job is running. {note}"
    observed = Observed(pods=pods, services=services, now=NOW)
    p = decide(elastic_raw(4, metrics=[CPU_80], status=status), observed, seen_scale={"Worker": 4})
    assert [e for e in p.events if e.reason.startswith("Scaled")] == []
    assert p.status is None or running_message(p) == f"PyTorchJob job is running. {note}"


def test_nothing_is_announced_before_the_job_runs_or_when_nothing_changed() -> None:
    pods, services = workers(1)
    starting = decide(elastic_raw(3), Observed(pods=pods, services=services, now=NOW))
    assert [e for e in starting.events if e.reason.startswith("Scaled")] == []
    pods, services = workers(2)
    steady = decide(
        elastic_raw(2, status=RUNNING),
        Observed(pods=pods, services=services, now=NOW),
        seen_scale={"Worker": 2},
    )
    assert [e for e in steady.events if e.reason.startswith("Scaled")] == []


def test_why_reads_each_metric_against_its_target() -> None:
    value = {
        "type": "Pods",
        "pods": {
            "metric": {"name": "samples_per_second"},
            "target": {"type": "AverageValue", "averageValue": "200"},
        },
    }
    hpa = hpa_observed(metrics=[CPU_80, value], current=40)
    hpa["status"]["currentMetrics"].append(
        {
            "type": "Pods",
            "pods": {"metric": {"name": "samples_per_second"}, "current": {"averageValue": "150m"}},
        }
    )
    assert scaling.why(hpa) == "HPA: cpu 40% < 80%; samples_per_second 150m vs 200"
    assert scaling.why(hpa_observed(metrics=[CPU_80])) == "HPA"
    assert scaling.why(None) is None
