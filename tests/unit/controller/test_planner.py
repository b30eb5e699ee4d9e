"""The reconcile decision, table by table: one job state and one observation in, one
plan out."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import keys as K
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from tests.builders.observed import NOW, batch_job, mpi_raw, pod, pytorch_raw, service, stamp

PLUGINS = build_registry(("PyTorchJob", "TFJob", "MPIJob"))


def decide(raw: dict[str, Any], observed: Observed | None = None, **ctx: Any) -> Plan:
    observed = observed or Observed(now=NOW)
    if observed.now != NOW:
        observed = Observed(**{**observed.__dict__, "now": NOW})
    return plan(raw, PLUGINS[raw["kind"]], observed, Context(now=NOW, **ctx))


def cond(p: Plan, kind: str) -> dict[str, Any] | None:
    assert p.status is not None
    return next((c for c in p.status.get("conditions") or [] if c["type"] == kind), None)


def pods(*items: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in items}


def running_status(started_ago: float = 30) -> dict[str, Any]:
    return {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "PyTorchJobCreated",
                "message": "PyTorchJob job is created.",
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "PyTorchJobRunning",
                "message": "PyTorchJob job is running.",
            },
        ],
        "startTime": stamp(started_ago),
    }


def test_an_invalid_job_fails_with_every_problem() -> None:
    raw = pytorch_raw()
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    raw["spec"]["runPolicy"] = {"backoffLimit": "three"}
    p = decide(raw)
    failed = cond(p, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in failed["message"]
    assert "spec.runPolicy.backoffLimit" in failed["message"]
    assert p.apply == [] and p.job is None


def test_a_suspended_job_has_no_pods_and_keeps_its_start_time() -> None:
    raw = pytorch_raw(run_policy={"suspend": True}, status=running_status())
    observed = Observed(
        pods=pods(pod("job-master-0"), pod("job-worker-0")),
        services={"job-master-0": service("job-master-0")},
    )
    p = decide(raw, observed)
    assert {(r.kind, r.name) for r in p.delete} == {
        ("Pod", "job-master-0"),
        ("Pod", "job-worker-0"),
        ("Service", "job-master-0"),
    }
    assert cond(p, "Suspended")["status"] == "True"  # type: ignore[index]
    running = cond(p, "Running")
    assert running is not None and (running["status"], running["reason"]) == (
        "False",
        "PyTorchJobSuspended",
    )
    assert p.status is not None and p.status["startTime"] == stamp(30) and p.apply == []


def test_a_suspended_job_counts_its_terminating_pods_active_until_they_are_gone() -> None:
    # Kueue releases the quota once every replica reports 0 active pods (kueue#1574): a
    # pod being deleted still holds its GPUs, so it counts until it is gone.
    raw = pytorch_raw(run_policy={"suspend": True}, status=running_status())
    observed = Observed(
        pods=pods(
            pod("job-master-0", deleting=True),
            pod("job-worker-0", deleting=True),
            pod("job-worker-1", "Succeeded"),
        )
    )
    p = decide(raw, observed)
    assert [r.name for r in p.delete] == ["job-worker-1"]  # the others are being deleted
    assert p.status is not None
    active = {rt: st["active"] for rt, st in p.status["replicaStatuses"].items()}
    assert active == {"Master": 1, "Worker": 1}
    # The master gone, the worker still Terminating.
    p = decide(raw, Observed(pods=pods(pod("job-worker-0", deleting=True))))
    assert p.status is not None
    active = {rt: st["active"] for rt, st in p.status["replicaStatuses"].items()}
    assert active == {"Master": 0, "Worker": 1}
    # Every pod gone: nothing active, what lets Kueue release the quota.
    p = decide(raw, Observed())
    assert p.status is not None
    active = {rt: st["active"] for rt, st in p.status["replicaStatuses"].items()}
    assert active == {"Master": 0, "Worker": 0}


def test_resuming_sets_suspended_false_and_restarts_the_clock() -> None:
    status = running_status()
    status["conditions"].append(
        {"type": "Suspended", "status": "True", "reason": "PyTorchJobSuspended"}
    )
    p = decide(pytorch_raw(status=status))
    suspended = cond(p, "Suspended")
    assert suspended is not None and (suspended["status"], suspended["reason"]) == (
        "False",
        "PyTorchJobResumed",
    )
    assert p.status is not None and p.status["startTime"] == stamp(0)
    assert ("Pod", "job-master-0") in {(o["kind"], o["metadata"]["name"]) for o in p.create}


def test_the_deadline_fails_the_job_and_stops_active_pods() -> None:
    raw = pytorch_raw(
        run_policy={"activeDeadlineSeconds": 20}, status=running_status(started_ago=20)
    )
    observed = Observed(pods=pods(pod("job-master-0"), pod("job-worker-0", "Succeeded")))
    p = decide(raw, observed)
    failed = cond(p, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert [(r.kind, r.name) for r in p.delete] == [("Pod", "job-master-0")]
    assert p.status is not None and p.status["completionTime"] == stamp(0)
    assert p.metrics == []  # the result is counted by the reconciler, once written


def test_before_the_deadline_the_job_is_requeued_for_it() -> None:
    raw = pytorch_raw(
        workers=0, run_policy={"activeDeadlineSeconds": 60}, status=running_status(started_ago=20)
    )
    p = decide(
        raw,
        Observed(
            pods=pods(pod("job-master-0")), services={"job-master-0": service("job-master-0")}
        ),
    )
    assert p.requeue_after is not None and 39.9 < p.requeue_after < 40.2


def test_the_startup_timeout_annotation_bounds_the_gate() -> None:
    raw = pytorch_raw(status=running_status(started_ago=100))
    raw["status"]["conditions"] = raw["status"]["conditions"][:1]
    raw["metadata"]["annotations"] = {K.STARTUP_TIMEOUT_ANNOTATION: "30"}
    stuck = pod(
        "job-master-0",
        "Pending",
        created_ago=31,
        waiting="ImagePullBackOff",
        message="pull access denied",
    )
    p = decide(raw, Observed(pods=pods(stuck), services={"job-master-0": service("job-master-0")}))
    failed = cond(p, "Failed")
    assert failed is not None and failed["reason"] == "StartupTimeout"
    assert "ImagePullBackOff" in failed["message"] and "pull access denied" in failed["message"]
    assert [(r.kind, r.name) for r in p.delete] == [
        ("Pod", "job-master-0"),
        ("Service", "job-master-0"),
    ]


def test_an_mpijob_succeeds_when_its_launcher_job_completes() -> None:
    raw = mpi_raw(workers=1)
    observed = Observed(
        pods=pods(pod("job-worker-0", owner_kind="MPIJob")),
        batch_jobs={"job-launcher": batch_job("job-launcher", "Complete", completionTime=stamp(5))},
    )
    p = decide(raw, observed)
    succeeded = cond(p, "Succeeded")
    assert succeeded is not None and succeeded["reason"] == "MPIJobSucceeded"
    assert p.status is not None and p.status["completionTime"] == stamp(5)
    # The worker (sshd) never exits by itself: it is stopped.
    assert [(r.kind, r.name) for r in p.delete] == [("Pod", "job-worker-0")]


def test_the_gated_launcher_pod_is_released_once_its_workers_are_ready() -> None:
    raw = mpi_raw(workers=2)
    raw["status"] = {"sshAuthSecretName": "job-ssh-abcde"}
    launcher = pod(
        "job-launcher-x7",
        "Pending",
        owner_kind="Job",
        labels={K.REPLICA_TYPE: "launcher", K.JOB_ROLE: "launcher"},
    )
    launcher["spec"] = {"schedulingGates": [{"name": "other"}, {"name": K.STARTUP_GATE}]}
    launchers = {"job-launcher": batch_job("job-launcher")}
    waiting = Observed(
        pods=pods(launcher, pod("job-worker-0"), pod("job-worker-1", "Pending")),
        services={"job": service("job", replica_index=False)},
        batch_jobs=launchers,
    )
    assert decide(raw, waiting).ungate == []
    ready = Observed(
        pods=pods(launcher, pod("job-worker-0"), pod("job-worker-1")),
        services={"job": service("job", replica_index=False)},
        batch_jobs=launchers,
    )
    assert [(r.kind, r.name, r.uid) for r in decide(raw, ready).ungate] == [
        ("Pod", "job-launcher-x7", "uid-job-launcher-x7")
    ]


def test_scaling_down_deletes_the_surplus_replicas() -> None:
    labels = {K.REPLICA_INDEX: "2"}
    observed = Observed(
        pods=pods(pod("job-master-0"), pod("job-worker-0"), pod("job-worker-2", labels=labels)),
        services={"job-worker-2": service("job-worker-2")},
    )
    p = decide(pytorch_raw(workers=1, status=running_status()), observed)
    assert {(r.kind, r.name) for r in p.delete} == {
        ("Pod", "job-worker-2"),
        ("Service", "job-worker-2"),
    }


def succeeded_status(completed_ago: float) -> dict[str, Any]:
    status = running_status()
    status["conditions"][-1]["status"] = "False"
    status["conditions"].append(
        {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}
    )
    status["completionTime"] = stamp(completed_ago)
    return status


def test_a_finished_job_gives_late_ranks_their_grace_then_waits_for_its_ttl() -> None:
    raw = pytorch_raw(
        workers=1, run_policy={"ttlSecondsAfterFinished": 30}, status=succeeded_status(10)
    )
    observed = Observed(pods=pods(pod("job-master-0", "Succeeded"), pod("job-worker-0")))
    p = decide(raw, observed, success_grace_seconds=60)
    assert p.apply == [] and p.delete == []  # worker-0 has 50 s left to exit by itself
    assert p.status is not None
    assert p.status["replicaStatuses"]["Worker"]["active"] == 1
    assert p.status["replicaStatuses"]["Worker"]["succeeded"] == 0
    assert p.requeue_after is not None and 20 < p.requeue_after < 20.1  # the TTL first
    assert not p.delete_job
    later = decide(raw, observed, success_grace_seconds=5)
    assert [(r.kind, r.name) for r in later.delete] == [("Pod", "job-worker-0")]


def test_a_late_rank_that_exits_by_itself_is_counted_succeeded() -> None:
    raw = pytorch_raw(workers=1, status=succeeded_status(10))
    raw["status"]["replicaStatuses"] = {"Worker": {"active": 1}, "Master": {"succeeded": 1}}
    observed = Observed(
        pods=pods(pod("job-master-0", "Succeeded"), pod("job-worker-0", "Succeeded"))
    )
    p = decide(raw, observed)
    assert p.delete == [] and p.status is not None
    worker = p.status["replicaStatuses"]["Worker"]
    assert worker.get("active", 0) == 0 and worker["succeeded"] == 1


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        ("None", set()),
        ("Running", {("Pod", "job-worker-0"), ("Service", "job-worker-0")}),
        (
            "All",
            {
                ("Pod", "job-master-0"),
                ("Pod", "job-worker-0"),
                ("Service", "job-master-0"),
                ("Service", "job-worker-0"),
            },
        ),
    ],
)
def test_an_explicit_clean_pod_policy_acts_at_once_as_upstream(
    policy: str, deleted: set[tuple[str, str]]
) -> None:
    raw = pytorch_raw(workers=1, run_policy={"cleanPodPolicy": policy}, status=running_status())
    observed = Observed(
        pods=pods(pod("job-master-0", "Succeeded"), pod("job-worker-0")),
        services={"job-master-0": service("job-master-0"), "job-worker-0": service("job-worker-0")},
    )
    p = decide(raw, observed, success_grace_seconds=60)
    assert cond(p, "Succeeded") is not None
    assert {(r.kind, r.name) for r in p.delete} == deleted
    assert p.status is not None
    # The running rank is counted as running, not as succeeded.
    assert p.status["replicaStatuses"]["Worker"]["active"] == 1


def test_after_a_failure_active_pods_stop_at_once_by_default() -> None:
    raw = pytorch_raw(workers=2, restart_policy="Never", status=running_status())
    observed = Observed(
        pods=pods(
            pod("job-master-0"), pod("job-worker-0", "Failed", exit_code=1), pod("job-worker-1")
        )
    )
    p = decide(raw, observed, success_grace_seconds=60)
    assert cond(p, "Failed") is not None
    assert {(r.kind, r.name) for r in p.delete if r.kind == "Pod"} == {
        ("Pod", "job-master-0"),
        ("Pod", "job-worker-1"),
    }


def test_an_mpijob_ttl_removes_its_launcher_job_and_keeps_the_mpijob() -> None:
    raw = mpi_raw(workers=1, runPolicy={"ttlSecondsAfterFinished": 5})
    raw["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
            {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"},
        ],
        "completionTime": stamp(6),
    }
    observed = Observed(
        batch_jobs={"job-launcher": batch_job("job-launcher", "Complete", completionTime=stamp(6))}
    )
    p = decide(raw, observed)
    assert [(r.kind, r.name) for r in p.delete] == [("Job", "job-launcher")]
    assert not p.delete_job


def test_nothing_changed_means_no_status_write() -> None:
    raw = pytorch_raw(workers=1)
    observed = Observed(
        pods=pods(pod("job-master-0"), pod("job-worker-0")),
        services={"job-master-0": service("job-master-0"), "job-worker-0": service("job-worker-0")},
    )
    first = decide(raw, observed)
    assert first.status is not None
    raw["status"] = first.status
    second = decide(raw, observed)
    assert second.status is None
