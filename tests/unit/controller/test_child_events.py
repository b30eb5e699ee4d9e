"""Per-child Events: upstream's reasons and wording, bounded per reconcile."""

from __future__ import annotations

from kubetrain.controller import child_events
from tests.unit.controller.builders import pod


def child(kind: str, name: str) -> dict[str, object]:
    return {"kind": kind, "metadata": {"name": name}}


def test_creations_are_worded_as_upstream() -> None:
    events = child_events.created([child("Pod", "j-master-0"), child("Service", "j-master-0")])
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Normal", "SuccessfulCreatePod", "Created pod: j-master-0"),
        ("Normal", "SuccessfulCreateService", "Created service: j-master-0"),
    ]


def test_a_large_job_gets_ten_events_per_kind_and_one_summary() -> None:
    pods = [child("Pod", f"j-worker-{i}") for i in range(500)]
    events = child_events.created(pods)
    assert len(events) == child_events.PER_KIND + 1
    summary = events[-1]
    assert summary.message == (
        "Created 490 more pods: j-worker-10, j-worker-11, j-worker-12, j-worker-13, "
        "j-worker-14, ..."
    )


def test_the_secret_created_under_a_generated_name_is_not_announced() -> None:
    assert child_events.created([child("Secret", "")]) == []


def test_an_exit_is_recorded_once_and_forgotten_with_its_pod() -> None:
    done = pod("j-worker-0", "Succeeded", exit_code=0, reason="Completed")
    failed = pod("j-worker-1", "Failed", exit_code=137, reason="OOMKilled")
    running = pod("j-worker-2")
    events, seen = child_events.exited([done, failed, running], "main", frozenset())
    assert [e.message for e in events] == [
        "Pod: ns.j-worker-0 exited with code 0",
        "Pod: ns.j-worker-1 exited with code 137",
    ]
    again, seen_again = child_events.exited([done, failed, running], "main", seen)
    assert again == [] and seen_again == seen
    # A pod that is gone is forgotten (memory bounded by the live pods).
    _, after = child_events.exited([running], "main", seen)
    assert after == frozenset()
