"""Per-child Events: upstream's reasons and wording, one per kind per reconcile."""

from __future__ import annotations

from kubetrain.controller import child_events
from kubetrain.controller.decisions import Event
from tests.builders.observed import pod


def child(kind: str, name: str) -> dict[str, object]:
    return {"kind": kind, "metadata": {"name": name}}


def test_creations_are_worded_as_upstream() -> None:
    events = child_events.created([child("Pod", "j-master-0"), child("Service", "j-master-0")])
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Normal", "SuccessfulCreatePod", "Created pod: j-master-0"),
        ("Normal", "SuccessfulCreateService", "Created service: j-master-0"),
    ]


def test_several_children_of_a_kind_are_one_event_naming_them() -> None:
    events = child_events.created(
        [child("Pod", "j-worker-0"), child("Service", "j-worker-0"), child("Pod", "j-worker-1")]
    )
    assert [(e.reason, e.message) for e in events] == [
        ("SuccessfulCreatePod", "Created 2 pods: j-worker-0, j-worker-1"),
        ("SuccessfulCreateService", "Created service: j-worker-0"),
    ]


def test_a_large_job_gets_one_event_per_kind_quoting_ten_names() -> None:
    pods = [child("Pod", f"j-worker-{i}") for i in range(500)]
    [event] = child_events.created(pods)
    quoted = ", ".join(f"j-worker-{i}" for i in range(child_events.QUOTED))
    assert event.message == f"Created 500 pods: {quoted} and 490 more"


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


def test_the_reconcile_that_creates_the_job_names_its_children_in_one_event() -> None:
    created = Event("Normal", "MPIJobCreated", "MPIJob m is created.")
    waiting = Event(
        "Normal",
        "WaitingForReplicas",
        "Waiting for the workers to be Ready before creating the launcher.",
        key="waiting/t0/Launcher",
    )
    children = [
        child("Secret", "m-ssh"),
        child("Service", "m"),
        child("ConfigMap", "m-config"),
        child("Pod", "m-worker-0"),
        child("Pod", "m-worker-1"),
        child("Job", "m-launcher"),
    ]
    events, folded = child_events.announce([created, waiting], children, "MPIJobCreated")
    assert [(e.reason, e.message) for e in events] == [
        (
            "MPIJobCreated",
            "MPIJob m is created. Created service: m; config map: m-config; 2 pods: "
            "m-worker-0, m-worker-1; job: m-launcher. Waiting for the workers to be Ready "
            "before creating the launcher.",
        )
    ]
    assert folded == ["waiting/t0/Launcher"]


def test_a_later_reconcile_announces_one_event_per_kind() -> None:
    running = Event("Normal", "MPIJobRunning", "MPIJob m is running.")
    events, folded = child_events.announce([running], [child("Pod", "m-worker-1")], "MPIJobCreated")
    assert [(e.reason, e.message) for e in events] == [
        ("MPIJobRunning", "MPIJob m is running."),
        ("SuccessfulCreatePod", "Created pod: m-worker-1"),
    ]
    assert folded == []
