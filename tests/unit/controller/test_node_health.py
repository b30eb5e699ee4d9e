"""Lost and unhealthy nodes: which signals count, after which grace, how the job's pods on
them look to the policies, and which deletions are forced. The whole path through the
planner: a Worker's node goes NotReady, and the gang (the default scope for
infrastructure failures) restarts against the infrastructure budget, naming the node."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import keys as K
from kubetrain.controller import node_health as N
from kubetrain.controller import reasons as R
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.model import Observed
from kubetrain.controller.node_rules import NodeRules
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.trim import trim_node
from tests.builders.observed import NOW, pod, pytorch_raw, stamp

PLUGINS = build_registry(("PyTorchJob",))
NAMES = ("job-master-0", "job-worker-0", "job-worker-1")
NODES = {"job-master-0": "gpu-1", "job-worker-0": "gpu-2", "job-worker-1": "gpu-3"}


def node(
    name: str,
    *,
    ready: str = "True",
    since: float = 0,
    conditions: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    gpus: str | None = None,
) -> dict[str, Any]:
    conds = [{"type": "Ready", "status": ready, "lastTransitionTime": stamp(since)}]
    conds += [
        {"type": t, "status": "True", "reason": reason, "lastTransitionTime": stamp(since)}
        for t, reason in (conditions or {}).items()
    ]
    status: dict[str, Any] = {"conditions": conds}
    if gpus is not None:
        status["allocatable"] = {K.GPU_RESOURCE: gpus}
    return {"metadata": {"name": name}, "spec": {"taints": taints or []}, "status": status}


def on_node(p: dict[str, Any], node_name: str, gpus: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node_name}
    if gpus:
        spec["containers"] = [{"resources": {"limits": {K.GPU_RESOURCE: str(gpus)}}}]
    return {**p, "spec": spec}


def observed(nodes: dict[str, dict[str, Any] | None], **pods: dict[str, Any]) -> Observed:
    found = {n: on_node(pods.get(n) or pod(n), NODES[n]) for n in NAMES}
    return Observed(now=NOW, pods=found, nodes=nodes)


def healthy() -> dict[str, dict[str, Any] | None]:
    return {name: node(name) for name in NODES.values()}


# -- the signals ------------------------------------------------------------------------------


def test_a_deleted_node_is_lost_at_once() -> None:
    trouble = N.assess("gpu-7", None, NodeRules(), NOW)
    assert trouble == N.Trouble("gpu-7", N.NODE_LOST, "node gpu-7 was deleted")
    assert trouble.unreachable


def test_a_node_not_ready_is_lost_only_after_its_grace() -> None:
    rules = NodeRules(grace_seconds=60)
    early = N.assess("gpu-7", node("gpu-7", ready="False", since=20), rules, NOW)
    assert early is not None and early.due_in == 40
    assert early.signal == "node gpu-7 NotReady for 20 s"
    late = N.assess("gpu-7", node("gpu-7", ready="Unknown", since=62), rules, NOW)
    assert late is not None and late.due_in == 0
    assert late.signal == "node gpu-7 unreachable for 62 s"
    assert late.reason == N.NODE_LOST


def test_an_unhealthy_condition_or_taint_acts_at_once_and_a_ready_node_is_fine() -> None:
    rules = NodeRules(taints=("example.com/gpu-quarantine",))
    assert N.assess("gpu-7", node("gpu-7"), rules, NOW) is None
    xid = node("gpu-7", conditions={"SysLogsXIDError": "Xid79"})
    trouble = N.assess("gpu-7", xid, rules, NOW)
    assert trouble == N.Trouble(
        "gpu-7", N.NODE_UNHEALTHY, "condition SysLogsXIDError=True on node gpu-7 (Xid79)"
    )
    assert not trouble.unreachable
    # A condition the rules do not name is not a trouble (MemoryPressure is the kubelet's).
    assert N.assess("gpu-7", node("gpu-7", conditions={"MemoryPressure": "x"}), rules, NOW) is None
    tainted = node("gpu-7", taints=[{"key": "example.com/gpu-quarantine", "effect": "NoSchedule"}])
    found = N.assess("gpu-7", tainted, rules, NOW)
    assert found is not None
    assert found.signal == "taint example.com/gpu-quarantine:NoSchedule on node gpu-7"


def test_a_gpu_withdrawn_below_what_the_pods_hold_is_unhealthy() -> None:
    pods = [on_node(pod("a"), "gpu-7", gpus=8)]
    full = node("gpu-7", gpus="8")
    assert N.assess("gpu-7", full, NodeRules(), NOW, pods) is None
    trouble = N.assess("gpu-7", node("gpu-7", gpus="7"), NodeRules(), NOW, pods)
    assert trouble is not None and trouble.reason == N.NODE_UNHEALTHY
    assert "7 allocatable nvidia.com/gpu, fewer than the 8" in trouble.signal


def test_the_jobs_annotations_override_the_rules_or_refuse_it() -> None:
    rules, invalid = N.job_rules(
        {K.NODE_LOST_GRACE_ANNOTATION: "5", K.FORCE_DELETE_ANNOTATION: "true"}, NodeRules()
    )
    assert (rules.grace_seconds, rules.force_delete, invalid) == (5, True, None)
    assert N.job_rules({K.NODE_LOST_GRACE_ANNOTATION: "soon"}, NodeRules())[1] == (
        K.NODE_LOST_GRACE_ANNOTATION,
        "soon",
    )
    assert N.job_rules({K.FORCE_DELETE_ANNOTATION: "yes"}, NodeRules())[1] == (
        K.FORCE_DELETE_ANNOTATION,
        "yes",
    )


def test_the_trimmed_node_keeps_what_the_rules_read_and_no_heartbeat() -> None:
    raw = {
        "metadata": {"name": "gpu-7", "labels": {"a": "b"}, "resourceVersion": "9"},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "t"}]},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2026-01-01T00:00:10Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "allocatable": {K.GPU_RESOURCE: "8", "cpu": "96"},
        },
    }
    assert trim_node(raw) == {
        "kind": "Node",
        "metadata": {"name": "gpu-7", "resourceVersion": "9"},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "allocatable": {K.GPU_RESOURCE: "8"},
        },
    }


# -- what the policies see, and the deletions -------------------------------------------------


def test_pods_on_a_lost_node_show_failed_and_others_as_they_are() -> None:
    nodes = healthy() | {"gpu-2": node("gpu-2", ready="Unknown", since=90)}
    seen = observed(nodes)
    found = N.troubles(seen, NodeRules(), NOW)
    assert list(found) == ["gpu-2"]
    shown = N.view(seen, found)
    lost = shown.pods["job-worker-0"]["status"]
    assert (lost["phase"], lost["reason"], lost["message"]) == (
        "Failed",
        "NodeLost",
        "node gpu-2 unreachable for 90 s",
    )
    assert {"type": "DisruptionTarget", "status": "True", "reason": "NodeLost"} in lost[
        "conditions"
    ]
    assert shown.pods["job-worker-1"] is seen.pods["job-worker-1"]


def test_nothing_is_judged_without_a_node_watch() -> None:
    seen = Observed(now=NOW, pods={"job-worker-0": on_node(pod("job-worker-0"), "gpu-2")})
    assert N.troubles(seen, NodeRules(), NOW) == {}


def pytorch(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    raw = pytorch_raw(workers=2, restart_policy="OnFailure", run_policy={"backoffLimit": 0})
    raw["metadata"]["annotations"] = annotations or {}
    raw["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
            {"type": "Running", "status": "True", "reason": "PyTorchJobRunning"},
        ],
        "startTime": stamp(60),
    }
    return raw


def decide(raw: dict[str, Any], seen: Observed, rules: NodeRules | None = None) -> Plan:
    return plan(raw, PLUGINS["PyTorchJob"], seen, Context(now=NOW, node_rules=rules or NodeRules()))


def condition(p: Plan, kind: str) -> dict[str, Any] | None:
    return next((c for c in (p.status or {}).get("conditions") or [] if c["type"] == kind), None)


def test_a_lost_node_restarts_the_gang_against_the_infrastructure_budget() -> None:
    """backoffLimit 0 and restartPolicy OnFailure: the program may not fail once, yet the
    lost node restarts the whole gang, named in the condition, backoffLimit untouched."""
    nodes = healthy() | {"gpu-2": node("gpu-2", ready="False", since=62)}
    planned = decide(pytorch(), observed(nodes))
    assert condition(planned, "Failed") is None
    assert planned.status is not None
    assert planned.status["gangRestart"] == {
        "attempt": 1,
        "trigger": "uid-job-worker-0",
        "infrastructure": 1,
        "reason": "NodeLost",
        "since": stamp(),
    }
    assert sorted(d.name for d in planned.delete) == sorted(NAMES)
    # Not forced by default: the node may still run the old process.
    assert not any(d.force for d in planned.delete)
    restarting = condition(planned, "Restarting")
    assert restarting is not None
    assert (
        "pod job-worker-0 failed (NodeLost: node gpu-2 NotReady for 62 s)"
        in (restarting["message"])
    )
    assert "infrastructure restarts used: 1 of 10" in restarting["message"]
    assert planned.metrics == ["infrastructure/NodeLost"]


def test_within_the_grace_nothing_moves_and_the_job_is_looked_at_when_it_ends() -> None:
    nodes = healthy() | {"gpu-2": node("gpu-2", ready="False", since=20)}
    planned = decide(pytorch(), observed(nodes))
    assert planned.delete == [] and condition(planned, "Restarting") is None
    assert planned.requeue_after is not None and planned.requeue_after <= 40


def test_the_jobs_own_grace_and_force_deletion_apply() -> None:
    annotations = {K.NODE_LOST_GRACE_ANNOTATION: "10", K.FORCE_DELETE_ANNOTATION: "true"}
    nodes = healthy() | {"gpu-2": node("gpu-2", ready="False", since=20)}
    planned = decide(pytorch(annotations), observed(nodes))
    forced = {d.name for d in planned.delete if d.force}
    # The pod on the lost node is force-deleted; those on healthy nodes go gracefully.
    assert forced == {"job-worker-0"}
    assert sorted(d.name for d in planned.delete) == sorted(NAMES)


def test_a_pod_stuck_terminating_on_a_lost_node_is_force_deleted_or_waited_for() -> None:
    nodes = healthy() | {"gpu-2": None}  # deleted
    stuck = pod("job-worker-0", deleting=True)
    raw = pytorch()
    raw["status"]["gangRestart"] = {"attempt": 1, "trigger": "t", "reason": "NodeLost"}
    # The new attempt waits for the old pods (attempt 0, unlabelled): the stuck one is
    # forced when allowed...
    allowed = decide(raw, observed(nodes, **{"job-worker-0": stuck}), NodeRules(force_delete=True))
    assert [(d.name, d.force) for d in allowed.delete if d.name == "job-worker-0"] == [
        ("job-worker-0", True)
    ]
    # ... and otherwise an Event says what the job waits for and how to stop waiting.
    waiting = decide(raw, observed(nodes, **{"job-worker-0": stuck}))
    assert not any(d.force for d in waiting.delete)
    (event,) = [e for e in waiting.events if e.reason == "WaitingForLostNode"]
    assert "pod job-worker-0 stays Terminating on node gpu-2 (node gpu-2 was deleted)" in (
        event.message
    )
    assert K.FORCE_DELETE_ANNOTATION in event.message


def test_an_unhealthy_gpu_condition_moves_the_job_at_once() -> None:
    nodes = healthy() | {"gpu-3": node("gpu-3", conditions={"SysLogsGPUFallenOff": "GPU3"})}
    planned = decide(pytorch(), observed(nodes))
    restarting = condition(planned, "Restarting")
    assert restarting is not None
    assert (
        "NodeUnhealthy: condition SysLogsGPUFallenOff=True on node gpu-3 (GPU3)"
        in (restarting["message"])
    )


def test_pod_scope_recreates_only_the_lost_pod() -> None:
    annotations = {K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION: "Pod"}
    nodes = healthy() | {"gpu-2": None}
    planned = decide(pytorch(annotations), observed(nodes))
    assert [d.name for d in planned.delete] == ["job-worker-0"]
    assert planned.status is not None
    assert planned.status["replicaStatuses"]["Worker"]["infrastructureRestarts"] == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (K.NODE_LOST_GRACE_ANNOTATION, "1m"),
        (K.FORCE_DELETE_ANNOTATION, "True"),
        (K.INFRASTRUCTURE_RESTART_SCOPE_ANNOTATION, "Node"),
    ],
)
def test_an_invalid_annotation_refuses_the_job(key: str, value: str) -> None:
    planned = decide(pytorch({key: value}), observed(healthy()))
    failed = condition(planned, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert f"metadata.annotations[{key}]: {value!r}" in failed["message"]


def test_a_restarted_gangs_pods_carry_the_attempt_and_the_reason() -> None:
    raw = pytorch()
    raw["status"]["gangRestart"] = {"attempt": 1, "trigger": "t", "reason": "NodeLost"}
    planned = decide(raw, Observed(now=NOW, pods={}, nodes={}))
    created = [c for c in planned.create if c["kind"] == "Pod"]
    assert created
    for child in created:
        assert child["metadata"]["labels"][K.ATTEMPT_LABEL] == "1"
        env = {e["name"]: e.get("value") for e in child["spec"]["containers"][0]["env"]}
        assert (env[K.ATTEMPT_ENV], env[K.RESTART_REASON_ENV]) == ("1", "NodeLost")
        # The job's own scope is Pod: its restartPolicy is kept.
        assert child["spec"]["restartPolicy"] == "OnFailure"


def test_a_drain_eviction_restarts_the_gang_as_soon_as_the_pod_is_marked() -> None:
    """``kubectl drain`` evicts through the Eviction API: the pod is deleted gracefully
    (its termination grace for a last checkpoint) with ``DisruptionTarget``. The gang does
    not wait for it to end: the attempt is over, counted as the infrastructure's."""
    evicted = pod("job-worker-1", deleting=True)
    evicted["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
    )
    planned = decide(pytorch(), observed(healthy(), **{"job-worker-1": evicted}))
    assert planned.status is not None
    assert planned.status["gangRestart"]["reason"] == "EvictionByEvictionAPI"
    assert planned.status["gangRestart"]["infrastructure"] == 1
    # The others go now; the evicted one is already going (its grace is its own).
    assert sorted(d.name for d in planned.delete) == ["job-master-0", "job-worker-0"]
    assert planned.metrics == ["infrastructure/EvictionByEvictionAPI"]


def test_a_restarted_gang_that_cannot_run_says_what_it_waits_for() -> None:
    """After a drain the new gang is Pending on a cordoned node: the Restarting condition
    keeps why it restarted and adds what its pods wait for."""
    raw = pytorch()
    why = R.gang_infrastructure_restarting(
        "PyTorchJob", "job", "job-worker-0", "Evicted", attempt=1, used=1, limit=10
    )
    raw["status"]["conditions"][-1] = {
        "type": "Restarting",
        "status": "True",
        "reason": "PyTorchJobRestarting",
        "message": why,
        "lastTransitionTime": stamp(30),
    }
    raw["status"]["gangRestart"] = {"attempt": 1, "trigger": "t", "reason": "Evicted"}
    labels = {K.ATTEMPT_LABEL: "1"}
    unschedulable = "0/1 nodes are available: 1 node(s) were unschedulable."
    pods = {
        "job-master-0": pod("job-master-0", "Pending", labels=labels, unschedulable=unschedulable)
    }
    planned = decide(raw, Observed(now=NOW, pods=pods, nodes={}))
    restarting = condition(planned, "Restarting")
    assert restarting is not None and restarting["status"] == "True"
    assert restarting["message"] == (
        f"{why} Waiting: pod job-master-0 Unschedulable: {unschedulable}"
    )
    # Once it runs again, Running replaces it.
    running = {n: pod(n, labels=labels) for n in NAMES}
    assert planned.status is not None
    again = decide(
        {**raw, "status": {**raw["status"], "conditions": planned.status["conditions"]}},
        Observed(now=NOW, pods=running, nodes={}),
    )
    assert (condition(again, "Running") or {}).get("status") == "True"
    assert (condition(again, "Restarting") or {}).get("status") != "True"
    (recovered,) = [e for e in again.events if e.reason == "Recovered"]
    assert recovered.message == (
        "PyTorchJob job is running again 30 s after its gang restart (Evicted), as attempt 1."
    )


def test_a_second_node_lost_during_a_restart_costs_no_count_and_leaves_no_pod() -> None:
    """The gang restart to attempt 1 is under way (recorded, the old pods going) when a
    second node is lost: nothing is counted again, and the old pods stuck there are forced
    out too, so the new attempt starts as soon as they are gone."""
    raw = pytorch({K.FORCE_DELETE_ANNOTATION: "true"})
    raw["status"]["gangRestart"] = {
        "attempt": 1,
        "trigger": "uid-job-worker-0",
        "infrastructure": 1,
        "reason": "NodeLost",
    }
    nodes = healthy() | {"gpu-2": None, "gpu-3": node("gpu-3", ready="Unknown", since=90)}
    seen = observed(
        nodes,
        **{
            "job-worker-0": pod("job-worker-0", deleting=True),
            "job-worker-1": pod("job-worker-1", deleting=True),
        },
    )
    planned = decide(raw, seen)
    assert planned.status is None or planned.status["gangRestart"]["infrastructure"] == 1
    assert planned.metrics == []
    forced = sorted(d.name for d in planned.delete if d.force)
    assert forced == ["job-worker-0", "job-worker-1"]
    assert [d.name for d in planned.delete if not d.force] == ["job-master-0"]
    assert planned.create == []  # nothing new while the old gang is there


def test_a_recovery_is_timed_from_its_own_attempt_not_an_earlier_one() -> None:
    """Restarting stayed True across two attempts (its transition is the first's): the
    Recovered Event times the last one from when it began, recorded with the attempt."""
    raw = pytorch()
    raw["status"]["conditions"][-1] = {
        "type": "Restarting",
        "status": "True",
        "reason": "PyTorchJobRestarting",
        "message": R.gang_infrastructure_restarting(
            "PyTorchJob", "job", "job-worker-0", "NodeLost", attempt=2, used=2, limit=10
        ),
        "lastTransitionTime": stamp(300),
    }
    raw["status"]["gangRestart"] = {
        "attempt": 2,
        "trigger": "t",
        "reason": "NodeLost",
        "since": stamp(12),
    }
    labels = {K.ATTEMPT_LABEL: "2"}
    running = {n: pod(n, labels=labels) for n in NAMES}
    again = decide(raw, Observed(now=NOW, pods=running, nodes={}))
    (recovered,) = [e for e in again.events if e.reason == "Recovered"]
    assert recovered.message == (
        "PyTorchJob job is running again 12 s after its gang restart (NodeLost), as attempt 2."
    )


def test_a_pod_restarted_alone_after_a_gang_restart_is_no_gang_recovery() -> None:
    """Under attempt 1, a program failure restarted one pod (Pod scope): its Restarting
    condition is not the gang's, so running again is no Recovered Event of the gang (the
    Event's key is the attempt; an operator restarted since would otherwise repeat it)."""
    raw = pytorch()
    raw["status"]["conditions"][-1] = {
        "type": "Restarting",
        "status": "True",
        "reason": "PyTorchJobRestarting",
        "message": "PyTorchJob job is restarting: pod job-worker-0 was recreated.",
        "lastTransitionTime": stamp(20),
    }
    raw["status"]["gangRestart"] = {"attempt": 1, "trigger": "t", "since": stamp(600)}
    labels = {K.ATTEMPT_LABEL: "1"}
    running = {n: pod(n, labels=labels) for n in NAMES}
    again = decide(raw, Observed(now=NOW, pods=running, nodes={}))
    assert (condition(again, "Running") or {}).get("status") == "True"
    assert [e for e in again.events if e.reason == "Recovered"] == []
