"""Hang detection, decided by the planner: a job silent past its progress timeout restarts
as a gang (its budget of its own, the last report and the steps to redo in the message,
the pods given a short grace), the new gang is told the checkpoint, a job that never
reported is held to its startup timeout only, and the goodput accounting of the fault."""

from __future__ import annotations

from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.controller.decisions import Context, Plan
from kubetrain.controller.model import Observed
from kubetrain.controller.planner import plan
from kubetrain.controller.plugins.registry import build_registry
from tests.builders.observed import NOW, pod, pytorch_raw, service, stamp

PLUGINS = build_registry(("PyTorchJob",))
NAMES = ("job-master-0", "job-worker-0", "job-worker-1")


def progress(
    seconds_ago: float, *, step: int = 1234, attempt: int = 0, checkpoint: int | None = 1200
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lastReportTime": stamp(seconds_ago),
        "step": step,
        "pod": "job-worker-0",
        "node": "node-1",
        "attempt": attempt,
    }
    if checkpoint is not None:
        out["checkpoint"] = {
            "step": checkpoint,
            "location": f"/ckpt/step-{checkpoint}.pt",
            "time": stamp(seconds_ago + 30),
            "attempt": attempt,
        }
    return out


def hang_job(
    annotations: dict[str, str],
    *,
    reported: dict[str, Any] | None = None,
    running_for: float = 300,
    gang: dict[str, Any] | None = None,
    goodput: dict[str, Any] | None = None,
) -> dict[str, Any]:
    raw = pytorch_raw(workers=2)
    raw["metadata"]["annotations"] = annotations
    raw["status"] = {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "PyTorchJobCreated",
                "lastTransitionTime": stamp(400),
            },
            {
                "type": "Running",
                "status": "True",
                "reason": "PyTorchJobRunning",
                "lastTransitionTime": stamp(running_for),
            },
        ],
        "startTime": stamp(400),
    }
    if reported is not None:
        raw["status"]["progress"] = reported
    if gang is not None:
        raw["status"]["gangRestart"] = gang
    if goodput is not None:
        raw["status"]["goodput"] = goodput
    return raw


def running(attempt: int = 0) -> Observed:
    labels = {K.ATTEMPT_LABEL: str(attempt)} if attempt else {}
    return Observed(
        now=NOW,
        pods={n: pod(n, labels=labels, uid=f"{n}-a{attempt}") for n in NAMES},
        services={n: service(n) for n in NAMES},
    )


def decide(raw: dict[str, Any], observed: Observed, **ctx: Any) -> Plan:
    return plan(raw, PLUGINS["PyTorchJob"], observed, Context(now=NOW, **ctx))


def condition(p: Plan, kind: str) -> dict[str, Any] | None:
    status = p.status or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


TIMEOUT = {K.PROGRESS_TIMEOUT_ANNOTATION: "60"}


def test_a_job_reporting_within_its_timeout_is_looked_at_when_it_would_expire() -> None:
    p = decide(hang_job(TIMEOUT, reported=progress(45)), running())
    assert not p.delete and "gangRestart" not in (p.status or {})
    assert p.requeue_after is not None and 15 <= p.requeue_after <= 16


def test_a_silent_job_restarts_as_a_gang_naming_its_last_report_and_checkpoint() -> None:
    p = decide(hang_job(TIMEOUT, reported=progress(90)), running())
    status = p.status or {}
    assert status["gangRestart"] == {
        "attempt": 1,
        "trigger": "hang/0",
        "hangs": 1,
        "reason": "Hang",
        "since": stamp(0),
    }
    # Every pod goes, with a short grace: a rank stuck in a collective cannot save.
    assert sorted(r.name for r in p.delete) == sorted(NAMES)
    assert {r.grace for r in p.delete} == {K.HANG_TERMINATION_GRACE_SECONDS}
    restarting = condition(p, "Restarting")
    assert restarting is not None and restarting["status"] == "True"
    at = stamp(90)[11:19]
    message = restarting["message"]
    assert (
        f"no progress report for 90 s; last: step 1,234 at {at} from node-1 (pod job-worker-0)"
        in message
    )
    assert "hang restarts used: 1 of 3" in message
    assert "It resumes from checkpoint step 1,200 (34 steps to redo)." in message
    assert [e.reason for e in p.events if e.type == "Warning"] == ["HangRestart"]
    assert p.metrics == ["hang/Hang"]
    # The fault's loss starts at the checkpoint: what came after it is computed again.
    assert status["goodput"] == {
        "started": stamp(400),
        "faults": 1,
        "lostSeconds": 0,
        "stepsRedone": 34,
        "openSince": stamp(120),
    }


def test_the_new_gang_is_told_the_checkpoint_and_why_it_started() -> None:
    gang = {"attempt": 1, "trigger": "hang/0", "hangs": 1, "reason": "Hang", "since": stamp(5)}
    raw = hang_job(TIMEOUT, reported=progress(95), gang=gang)
    raw["status"]["conditions"][1].update(type="Restarting")
    p = decide(raw, Observed(now=NOW))
    pods = [c for c in p.create if c["kind"] == "Pod"]
    assert "job-master-0" in [c["metadata"]["name"] for c in pods]  # the workers follow
    for child in pods:
        env = {e["name"]: e.get("value") for e in child["spec"]["containers"][0]["env"]}
        assert env[E.CHECKPOINT_STEP] == "1200"
        assert env[E.CHECKPOINT_PATH] == "/ckpt/step-1200.pt"
        assert env[E.RESTART_ATTEMPT] == "1" and env[E.RESTART_REASON] == "Hang"


def test_the_hang_budget_ends_a_job_that_keeps_hanging() -> None:
    gang = {"attempt": 3, "trigger": "hang/2", "hangs": 3, "reason": "Hang", "since": stamp(200)}
    raw = hang_job(TIMEOUT, reported=progress(90, attempt=3), gang=gang)
    p = decide(raw, running(3))
    failed = condition(p, "Failed")
    assert failed is not None and failed["reason"] == K.HANG_RESTART_LIMIT_EXCEEDED
    assert "no progress report for 90 s" in failed["message"]
    assert "the hang restarts allowed (3) are used up" in failed["message"]
    assert K.HANG_RESTART_LIMIT_ANNOTATION in failed["message"]


def test_a_job_that_never_reported_is_held_to_its_startup_timeout_only() -> None:
    # A job that does not report is never taken for hung by the progress timeout.
    quiet = decide(hang_job(TIMEOUT, running_for=900), running())
    assert "gangRestart" not in (quiet.status or {}) and quiet.requeue_after is None
    startup = {**TIMEOUT, K.PROGRESS_STARTUP_TIMEOUT_ANNOTATION: "120"}
    waiting = decide(hang_job(startup, running_for=100), running())
    assert "gangRestart" not in (waiting.status or {})
    assert waiting.requeue_after is not None and 20 <= waiting.requeue_after <= 21
    p = decide(hang_job(startup, running_for=150), running())
    assert (p.status or {})["gangRestart"]["reason"] == "NoProgressReport"
    restarting = condition(p, "Restarting")
    assert restarting is not None
    assert (
        "no progress report since its pods started running, 150 s ago (its startup timeout)"
        in restarting["message"]
    )
    assert p.metrics == ["hang/NoProgressReport"]


def test_after_a_restart_the_new_gang_must_report_again_within_the_timeout() -> None:
    # The last report is the old attempt's: the silence counts from the restart.
    gang = {"attempt": 1, "trigger": "hang/0", "hangs": 1, "reason": "Hang", "since": stamp(70)}
    raw = hang_job(TIMEOUT, reported=progress(200), gang=gang, running_for=50)
    waiting = decide(raw, running(1))
    assert (waiting.status or {}).get("gangRestart", gang)["attempt"] == 1 and not waiting.delete
    assert waiting.requeue_after is not None and 10 <= waiting.requeue_after <= 11
    raw = hang_job(TIMEOUT, reported=progress(200), gang=gang, running_for=65)
    p = decide(raw, running(1))
    state = (p.status or {})["gangRestart"]
    assert (state["attempt"], state["hangs"], state["reason"]) == (2, 2, "NoProgressReport")
    restarting = condition(p, "Restarting")
    assert restarting is not None and "since its pods run again, 65 s ago" in restarting["message"]


def test_the_operators_default_applies_and_the_annotation_overrides_it() -> None:
    p = decide(hang_job({}, reported=progress(90)), running(), progress_timeout_seconds=60)
    assert (p.status or {})["gangRestart"]["reason"] == "Hang"
    off = {K.PROGRESS_TIMEOUT_ANNOTATION: "0"}
    kept = decide(hang_job(off, reported=progress(90)), running(), progress_timeout_seconds=60)
    assert "gangRestart" not in (kept.status or {})


def test_an_invalid_setting_refuses_the_job() -> None:
    p = decide(hang_job({K.PROGRESS_TIMEOUT_ANNOTATION: "2m"}, reported=progress(5)), running())
    failed = condition(p, "Failed")
    assert failed is not None and failed["reason"] == K.INVALID_SPEC
    assert "progress-timeout-seconds" in failed["message"] and "'2m'" in failed["message"]
    assert "a whole number of seconds" in failed["message"]


def test_the_first_report_after_the_fault_closes_it_with_the_time_lost() -> None:
    gang = {"attempt": 1, "trigger": "hang/0", "hangs": 1, "reason": "Hang", "since": stamp(40)}
    goodput = {
        "started": stamp(400),
        "faults": 1,
        "lostSeconds": 0,
        "stepsRedone": 34,
        "openSince": stamp(120),
    }
    # Running again, but no report of the new attempt yet: still open.
    before = hang_job(TIMEOUT, reported=progress(90), gang=gang, goodput=goodput, running_for=10)
    still = (decide(before, running(1)).status or {}).get("goodput", goodput)
    assert still == goodput
    after = hang_job(
        TIMEOUT, reported=progress(1, attempt=1), gang=gang, goodput=goodput, running_for=10
    )
    status = decide(after, running(1)).status or {}
    assert status["goodput"] == {
        "started": stamp(400),
        "faults": 1,
        "lostSeconds": 120,
        "stepsRedone": 34,
        "ratio": "0.700",
    }


def test_a_suspension_of_a_job_that_ran_is_a_fault_and_its_end_closes_it() -> None:
    raw = hang_job({}, reported=progress(10, checkpoint=None))
    raw["spec"]["runPolicy"] = {"suspend": True}
    suspended = decide(raw, running()).status or {}
    assert suspended["goodput"] == {
        "started": stamp(400),
        "faults": 1,
        "lostSeconds": 0,
        "stepsRedone": 0,
        "openSince": stamp(0),
    }
    # A job created suspended (Kueue's) has no fault.
    fresh = pytorch_raw(workers=2, run_policy={"suspend": True})
    assert "goodput" not in (decide(fresh, Observed(now=NOW)).status or {})


def test_a_resumed_job_gets_its_timeout_from_the_resume_not_its_last_report() -> None:
    # Suspended (Kueue's preemption) after its last report 200 s ago, resumed 30 s ago.
    raw = hang_job(TIMEOUT, reported=progress(200), running_for=20)
    raw["status"]["startTime"] = stamp(30)
    waiting = decide(raw, running())
    assert "gangRestart" not in (waiting.status or {}) and not waiting.delete
    assert waiting.requeue_after is not None and 40 <= waiting.requeue_after <= 41
    raw["status"]["startTime"] = stamp(70)
    raw["status"]["conditions"][1]["lastTransitionTime"] = stamp(65)
    p = decide(raw, running())
    restarting = condition(p, "Restarting")
    assert restarting is not None and "since its pods run again, 65 s ago" in restarting["message"]


def test_a_job_found_running_in_this_reconcile_is_looked_at_again_at_its_timeout() -> None:
    # Its Running condition is written by this very reconcile: the clock starts now.
    raw = hang_job({K.PROGRESS_STARTUP_TIMEOUT_ANNOTATION: "30"})
    raw["status"]["conditions"] = raw["status"]["conditions"][:1]
    p = decide(raw, running())
    assert condition(p, "Running") is not None
    assert p.requeue_after is not None and 30 <= p.requeue_after <= 31


def crashed_rank(seconds_ago: float) -> Observed:
    """Running pods; rank 1's training container restarted in place ``seconds_ago``."""
    observed = running()
    container = observed.pods["job-worker-0"]["status"]["containerStatuses"][0]
    container.update(name="pytorch", restartCount=1)
    container["lastState"] = {
        "terminated": {"exitCode": 137, "reason": "Error", "finishedAt": stamp(seconds_ago)}
    }
    return observed


def test_a_rank_restarted_in_place_after_the_last_report_is_a_fault_until_the_next() -> None:
    raw = hang_job({}, reported=progress(10), running_for=100)
    opened = (decide(raw, crashed_rank(5)).status or {})["goodput"]
    # Lost from the last checkpoint (40 s ago); its 34 steps are done again.
    assert opened == {
        "started": stamp(400),
        "faults": 1,
        "lostSeconds": 0,
        "stepsRedone": 34,
        "openSince": stamp(40),
    }
    # Still no report since the crash: still open, counted once.
    raw["status"]["goodput"] = opened
    assert (decide(raw, crashed_rank(5)).status or {}).get("goodput", opened) == opened
    # The first report after it closes it (the job resumed from the same checkpoint).
    checkpoint = raw["status"]["progress"]["checkpoint"]
    raw["status"]["progress"] = {**progress(1, step=1240), "checkpoint": checkpoint}
    closed = (decide(raw, crashed_rank(5)).status or {})["goodput"]
    assert closed == {
        "started": stamp(400),
        "faults": 1,
        "lostSeconds": 40,
        "stepsRedone": 34,
        "ratio": "0.900",
    }


def test_a_restart_before_the_last_report_or_of_a_job_that_does_not_report_is_none() -> None:
    reported_since = hang_job({}, reported=progress(1), running_for=100)
    assert "goodput" not in (decide(reported_since, crashed_rank(5)).status or {})
    silent = hang_job({}, running_for=100)
    assert "goodput" not in (decide(silent, crashed_rank(5)).status or {})


def test_a_checkpoint_written_on_sigterm_ends_the_time_lost_before_the_fault() -> None:
    # Suspended (preempted) when its last checkpoint was 40 s old; it wrote one more on
    # SIGTERM 20 s ago, was resumed 10 s ago and reports again.
    goodput = {"started": stamp(400), "faults": 1, "lostSeconds": 0, "openSince": stamp(40)}
    raw = hang_job({}, reported=progress(1, step=1300, checkpoint=None), goodput=goodput)
    raw["status"]["startTime"] = stamp(10)
    raw["status"]["progress"]["checkpoint"] = {
        "step": 1290,
        "location": "/ckpt/step-1290.pt",
        "time": stamp(20),
    }
    closed = (decide(raw, running()).status or {})["goodput"]
    assert closed["lostSeconds"] == 20
