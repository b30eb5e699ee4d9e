"""The startup gate: who waits for whom, and its bounded wait."""

from __future__ import annotations

from kubetrain.controller.model import Observed, StartupRule
from kubetrain.controller.policies import startup
from tests.builders.observed import NOW, pod, service, stamp

RULE = StartupRule(
    waiting=("Worker",),
    needed_pods=("job-master-0",),
    needed_services=("job-master-0",),
    waiting_label="the workers",
    needed_label="the master",
)


def observe(*pods: dict[str, object], services: tuple[str, ...] = ("job-master-0",)) -> Observed:
    return Observed(
        pods={p["metadata"]["name"]: p for p in pods},  # type: ignore[index]
        services={s: service(s) for s in services},
        now=NOW,
    )


def test_workers_wait_until_the_master_is_ready() -> None:
    gate = startup.evaluate(
        [RULE], observe(pod("job-master-0", "Pending")), started_at=None, timeout_seconds=60
    )
    assert gate.blocked == {"Worker"} and gate.timed_out is None


def test_a_ready_master_with_its_service_opens_the_gate() -> None:
    gate = startup.evaluate(
        [RULE], observe(pod("job-master-0")), started_at=None, timeout_seconds=60
    )
    assert gate.blocked == frozenset() and gate.waiting == ()


def test_a_missing_service_keeps_it_closed() -> None:
    gate = startup.evaluate(
        [RULE], observe(pod("job-master-0"), services=()), started_at=None, timeout_seconds=60
    )
    assert gate.blocked == {"Worker"}
    assert "Service job-master-0 does not exist" in gate.problems[0]


def test_the_wait_is_bounded_from_the_later_of_start_and_creation() -> None:
    from kubetrain.controller.conditions import parse_time

    started = parse_time(stamp(1000))
    young = pod("job-master-0", "Pending", created_ago=30, unschedulable="0/4 nodes are available")
    gate = startup.evaluate([RULE], observe(young), started_at=started, timeout_seconds=60)
    assert gate.timed_out is None and gate.requeue_after == 30
    old = pod("job-master-0", "Pending", created_ago=61, unschedulable="0/4 nodes are available")
    gate = startup.evaluate([RULE], observe(old), started_at=started, timeout_seconds=60)
    assert gate.timed_out is RULE
    assert "Unschedulable: 0/4 nodes are available" in gate.timeout_detail


def test_no_timeout_before_anything_started() -> None:
    gate = startup.evaluate([RULE], observe(), started_at=None, timeout_seconds=1)
    assert gate.timed_out is None and gate.requeue_after is None
    assert gate.problems == ("pod job-master-0 does not exist",)
