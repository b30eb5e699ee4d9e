"""Whole-gang restarts, decided by the planner step by step: the attempt recorded before
anything is deleted, the whole old gang deleted, nothing created until it is gone, the
new gang with a fresh rendezvous, each restart counted once (also when the operator
restarts between two steps), the limit, and an invalid scope."""

from __future__ import annotations

from typing import Any

from kubetrain.api import keys as K
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from tests.builders.observed import NOW, pod, pytorch_raw, service, stamp

PLUGINS = build_registry(("PyTorchJob",))
NAMES = ("job-master-0", "job-worker-0", "job-worker-1")


def gang_job(
    *,
    attempt: int | None = None,
    trigger: str | None = None,
    limit: int = 3,
    infrastructure: int | None = None,
    restart_policy: str = "OnFailure",
    annotations: dict[str, str] | None = None,
) -> Any:
    raw = pytorch_raw(workers=2, restart_policy=restart_policy, run_policy={"backoffLimit": limit})
    raw["metadata"]["annotations"] = {K.RESTART_SCOPE_ANNOTATION: "Gang", **(annotations or {})}
    raw["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
            {"type": "Running", "status": "True", "reason": "PyTorchJobRunning"},
        ],
        "startTime": stamp(60),
    }
    if attempt is not None:
        raw["status"]["gangRestart"] = {
            "attempt": attempt,
            **({"trigger": trigger} if trigger else {}),
            **({"infrastructure": infrastructure} if infrastructure else {}),
        }
    return raw


def gang_pods(
    attempt: int, *, failed: str | None = None, evicted: str | None = None, deleting: bool = False
) -> Observed:
    pods = {}
    for name in NAMES:
        labels = {K.ATTEMPT_LABEL: str(attempt)}
        uid = f"{name}-a{attempt}"
        if name == evicted:
            pods[name] = pod(
                name,
                "Failed",
                pod_reason="Evicted",
                message="low on memory",
                labels=labels,
                uid=uid,
            )
        elif name == failed:
            pods[name] = pod(
                name, "Failed", exit_code=137, labels=labels, uid=uid, deleting=deleting
            )
        else:
            pods[name] = pod(name, labels=labels, uid=uid, deleting=deleting)
    return Observed(now=NOW, pods=pods)


def decide(raw: dict[str, Any], observed: Observed) -> Plan:
    return plan(raw, PLUGINS["PyTorchJob"], observed, Context(now=NOW))


def condition(p: Plan, kind: str) -> dict[str, Any] | None:
    status = p.status or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def test_a_failed_rank_restarts_the_whole_gang_once() -> None:
    # Step 1: the attempt and the failed pod are recorded, every pod is deleted.
    first = decide(gang_job(), gang_pods(0, failed="job-worker-1"))
    assert first.status is not None
    assert first.status["gangRestart"] == {
        "attempt": 1,
        "trigger": "job-worker-1-a0",
        "reason": "Error",
        "since": stamp(),
    }
    assert sorted(r.name for r in first.delete) == sorted(NAMES)
    assert first.create == []
    restarting = condition(first, "Restarting")
    assert restarting is not None and restarting["status"] == "True"
    assert "gang starts again as attempt 1" in restarting["message"]
    assert "gang restarts used: 1 of 3" in restarting["message"]
    assert first.metrics.count("restarted") == 1
    assert [e.reason for e in first.events if e.reason == "GangRestart"] == ["GangRestart"]
    # The operator restarted before the deletions went out: the recorded trigger is not
    # counted again, and the old gang is deleted.
    again = decide(
        gang_job(attempt=1, trigger="job-worker-1-a0"), gang_pods(0, failed="job-worker-1")
    )
    assert again.status is None or again.status.get("gangRestart") == {
        "attempt": 1,
        "trigger": "job-worker-1-a0",
    }
    assert sorted(r.name for r in again.delete) == sorted(NAMES)
    assert again.metrics.count("restarted") == 0
    # Step 2: old pods still terminating: nothing is created.
    waiting = decide(
        gang_job(attempt=1, trigger="job-worker-1-a0"),
        gang_pods(0, failed="job-worker-1", deleting=True),
    )
    assert waiting.create == [] and waiting.delete == []
    assert waiting.requeue_after is not None
    # Step 3: all gone: the gang is created again as attempt 1 (the master first, as the
    # startup gate wants without a gang scheduler), no pod restarting alone in place.
    fresh = decide(gang_job(attempt=1, trigger="job-worker-1-a0"), Observed(now=NOW))
    created = [o for o in fresh.create if o["kind"] == "Pod"]
    assert [o["metadata"]["name"] for o in created] == ["job-master-0"]
    master = pod("job-master-0", labels={K.ATTEMPT_LABEL: "1"}, uid="m1")
    rest = decide(
        gang_job(attempt=1, trigger="job-worker-1-a0"),
        Observed(now=NOW, pods={"job-master-0": master}, services={n: service(n) for n in NAMES}),
    )
    created += [o for o in rest.create if o["kind"] == "Pod"]
    assert sorted(o["metadata"]["name"] for o in created) == sorted(NAMES)
    for obj in created:
        name = obj["metadata"]["name"]
        assert obj["metadata"]["labels"][K.ATTEMPT_LABEL] == "1", name
        assert obj["spec"]["restartPolicy"] == "Never", name
        env = {e["name"]: e.get("value") for e in obj["spec"]["containers"][0]["env"]}
        assert env[K.ATTEMPT_ENV] == "1", name
        assert env["PET_RDZV_ID"] == "job-1", name


def test_a_second_failure_is_a_second_restart_and_the_limit_holds() -> None:
    second = decide(
        gang_job(attempt=1, trigger="job-worker-1-a0"), gang_pods(1, failed="job-master-0")
    )
    assert second.status is not None
    assert second.status["gangRestart"] == {
        "attempt": 2,
        "trigger": "job-master-0-a1",
        "reason": "Error",
        "since": stamp(),
    }
    over = decide(
        gang_job(attempt=2, trigger="job-master-0-a1", limit=2), gang_pods(2, failed="job-worker-0")
    )
    failed = condition(over, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "the gang restarts allowed (2) are used up" in failed["message"]


def test_a_stale_failed_pod_of_an_older_attempt_is_not_counted() -> None:
    # A pod of attempt 0 that failed while attempt 1 runs (its deletion not seen yet).
    observed = gang_pods(1)
    old = pod("job-worker-1", "Failed", exit_code=137, labels={K.ATTEMPT_LABEL: "0"}, uid="old")
    observed = Observed(now=NOW, pods={**observed.pods, "job-worker-1": old})
    p = decide(gang_job(attempt=1, trigger="x"), observed)
    assert [r.name for r in p.delete] == ["job-worker-1"]
    assert p.status is None or p.status["gangRestart"]["attempt"] == 1


def test_without_the_annotation_pods_restart_one_by_one() -> None:
    raw = gang_job()
    raw["metadata"]["annotations"] = {}
    p = decide(raw, gang_pods(0, failed="job-worker-1"))
    assert [r.name for r in p.delete] == ["job-worker-1"]
    assert p.status is not None and "gangRestart" not in p.status


def test_an_unknown_scope_fails_the_job_saying_what_is_expected() -> None:
    raw = gang_job()
    raw["metadata"]["annotations"] = {K.RESTART_SCOPE_ANNOTATION: "gang"}
    failed = condition(decide(raw, gang_pods(0)), "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "'gang': expected Pod or Gang" in failed["message"]


def test_an_infrastructure_failure_restarts_the_gang_against_its_own_budget() -> None:
    """Under restartPolicy Never, with the gang's restart limit used up by the program's
    failures: an eviction still restarts the gang, counted as the infrastructure's."""
    evicted = decide(
        gang_job(attempt=3, trigger="job-worker-0-a2", restart_policy="Never"),
        gang_pods(3, evicted="job-worker-1"),
    )
    assert evicted.status is not None
    assert evicted.status["gangRestart"] == {
        "attempt": 4,
        "trigger": "job-worker-1-a3",
        "infrastructure": 1,
        "reason": "Evicted",
        "since": stamp(),
    }
    assert sorted(r.name for r in evicted.delete) == sorted(NAMES)
    restarting = condition(evicted, "Restarting")
    assert restarting is not None
    assert restarting["message"] == (
        "PyTorchJob job is restarting as a gang: pod job-worker-1 failed (Evicted: low on "
        "memory), an infrastructure failure, so every pod is deleted and the gang starts again "
        "as attempt 4; infrastructure restarts used: 1 of 10, the gang's restart limit "
        "untouched."
    )
    # The program's next failure: 3 of its attempts used (the 4th was the infrastructure's),
    # so with backoffLimit 3 the job fails.
    over = decide(
        gang_job(attempt=4, trigger="job-worker-1-a3", infrastructure=1),
        gang_pods(4, failed="job-master-0"),
    )
    failed = condition(over, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"


def test_the_infrastructure_budget_of_a_gang_holds() -> None:
    limited = {K.INFRASTRUCTURE_RESTART_LIMIT_ANNOTATION: "1"}
    # One program restart and one infrastructure restart so far: the program may go on.
    program = decide(
        gang_job(attempt=2, trigger="t", infrastructure=1, annotations=limited),
        gang_pods(2, failed="job-worker-0"),
    )
    assert program.status is not None
    assert program.status["gangRestart"] == {
        "attempt": 3,
        "trigger": "job-worker-0-a2",
        "infrastructure": 1,
        "reason": "Error",
        "since": stamp(),
    }
    restarting = condition(program, "Restarting")
    assert restarting is not None and "gang restarts used: 2 of 3" in restarting["message"]
    # A second eviction is one more than the budget of 1.
    over = decide(
        gang_job(attempt=3, trigger="t", infrastructure=1, annotations=limited),
        gang_pods(3, evicted="job-worker-0"),
    )
    failed = condition(over, "Failed")
    assert failed is not None and failed["reason"] == "InfrastructureRestartLimitExceeded"
    assert "(kubetrain.dev/infrastructure-restart-limit 1) are used up" in failed["message"]
