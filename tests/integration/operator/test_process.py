"""The operator as a process: killed and restarted mid-job (at every step of a restart),
and two replicas with leader election where only the leader acts."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.api import keys as K
from tests.integration.fault_proxy import FaultProxy, Request, Trap
from tests.integration.kube import condition, wait_for
from tests.integration.operator.jobs import Jobs, pytorch_job
from tests.integration.operator.process import OperatorProcess


def test_a_killed_operator_resumes_without_duplicates(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    first = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log").start()
    processes.append(first)
    jobs.create(pytorch_job("resume", workers=2, restart_policy="ExitCode"))
    pods = jobs.wait_running("resume", {"resume-master-0", "resume-worker-0", "resume-worker-1"})
    created = condition(jobs.wait_condition("PyTorchJob", "resume", "Running"), "Created")
    assert created is not None

    first.kill()
    # While no operator runs, a worker is OOM-killed.
    jobs.exit("resume-worker-0", 137, "OOMKilled")
    jobs.wait_pods(
        "resume",
        lambda p: p["resume-worker-0"]["status"]["phase"] == "Failed",
        what="resume-worker-0 Failed",
    )

    second = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log").start()
    processes.append(second)
    old_uid = pods["resume-worker-0"]["metadata"]["uid"]
    pods = jobs.wait_pods(
        "resume",
        # Between the deletion and the recreation the pod is absent: not done yet.
        lambda p: (
            "resume-worker-0" in p
            and p["resume-worker-0"]["metadata"]["uid"] != old_uid
            and p["resume-worker-0"]["status"].get("phase") == "Running"
        ),
        what="resume-worker-0 recreated by the new operator",
    )
    # No duplicate children: exactly one pod and one Service per replica.
    assert set(pods) == {"resume-master-0", "resume-worker-0", "resume-worker-1"}
    assert set(jobs.services("resume")) == set(pods)
    job = jobs.wait_condition("PyTorchJob", "resume", "Running")
    assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    # The status continued: the same Created condition, not a new one.
    assert condition(job, "Created") == created

    jobs.exit("resume-master-0", 0)
    jobs.wait_condition("PyTorchJob", "resume", "Succeeded")


@pytest.fixture
def proxy(kubeconfig: Path, tmp_path: Path) -> Iterator[FaultProxy]:
    running = FaultProxy(kubeconfig, tmp_path).start()
    yield running
    running.stop()


def _restart_status(job: str, restarts: int) -> Callable[[Request], bool]:
    """The status write that records restart number ``restarts`` of the job's Workers."""

    def matches(request: Request) -> bool:
        if request.method != "PATCH" or not request.path.endswith(f"/pytorchjobs/{job}/status"):
            return False
        workers = ((request.json() or {}).get("status") or {}).get("replicaStatuses") or {}
        return bool((workers.get("Worker") or {}).get("restarts") == restarts)

    return matches


def _pod_call(method: str, namespace: str, pod: str) -> Callable[[Request], bool]:
    """The DELETE of pod ``pod``, or the POST that creates it."""

    def matches(request: Request) -> bool:
        if request.method != method:
            return False
        if method == "DELETE":
            return request.path == f"/api/v1/namespaces/{namespace}/pods/{pod}"
        body = request.json() or {}
        return bool(
            request.path == f"/api/v1/namespaces/{namespace}/pods"
            and (body.get("metadata") or {}).get("name") == pod
        )

    return matches


def test_a_restart_is_counted_once_whichever_step_the_operator_dies_at(
    installed_crds: list[dict[str, Any]],
    namespace: str,
    jobs: Jobs,
    proxy: FaultProxy,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    """A Worker is OOM-killed four times; each time the operator is killed (SIGKILL) at
    another step of the restart, at the exact request, and a new one finishes it. With
    backoffLimit 4, a failure counted twice would fail the job or show in the count. Then
    two evictions restart the whole gang with the operator killed mid-restart."""
    log = tmp_path / "operator.log"
    operator = OperatorProcess(proxy.kubeconfig_path, namespace, log).start()
    processes.append(operator)
    jobs.create(
        pytorch_job("steps", workers=1, restart_policy="ExitCode", run_policy={"backoffLimit": 4})
    )
    worker = "steps-worker-0"
    pods = jobs.wait_running("steps", {"steps-master-0", worker})
    steps = [
        ("the status write is lost", _restart_status("steps", 1), "before"),
        ("status written, failed pod not deleted", _restart_status("steps", 2), "after"),
        ("pod deleted, not created again", _pod_call("DELETE", namespace, worker), "after"),
        ("pod created again, status not updated", _pod_call("POST", namespace, worker), "after"),
    ]
    for restarts, (step, matches, when) in enumerate(steps, start=1):
        trap = proxy.arm(Trap(matches, operator.kill, when=when))
        old_uid = pods[worker]["metadata"]["uid"]
        jobs.exit(worker, 137, "OOMKilled")
        assert trap.fired.wait(60), f"the operator never reached the step: {step}"
        assert operator.proc is not None and operator.proc.returncode is not None
        operator = OperatorProcess(proxy.kubeconfig_path, namespace, log).start()
        processes.append(operator)
        pods = jobs.wait_pods(
            "steps",
            lambda p, uid=old_uid: (  # type: ignore[misc]
                worker in p
                and p[worker]["metadata"]["uid"] != uid
                and p[worker]["status"].get("phase") == "Running"
            ),
            what=f"{worker} recreated after the operator died at: {step}",
        )
        job = jobs.wait(
            "PyTorchJob",
            "steps",
            _settled_after_restart,
            what=f"the job Running again, its failures all gone, after: {step}",
        )
        assert job is not None
        assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == restarts, step
        assert set(pods) == {"steps-master-0", worker}, step
        assert set(jobs.services("steps")) == set(pods), step
    # backoffLimit 4 is used up. Two evictions (infrastructure failures) restart the gang,
    # the operator killed mid-way each time: once its status write recorded the attempt,
    # once it deleted the old gang's first pod. Counted once each, never as the program's
    # (that would fail the job), and only the last attempt's pods are left.
    gang_steps = [
        ("attempt recorded, old gang not deleted", _gang_status("steps", 1), "after"),
        (
            "old gang partly deleted, new not created",
            _pod_call("DELETE", namespace, worker),
            "after",
        ),
    ]
    for attempt, (step, matches, when) in enumerate(gang_steps, start=1):
        trap = proxy.arm(Trap(matches, operator.kill, when=when))
        old = {p["metadata"]["uid"] for p in pods.values()}
        jobs.evict(worker)
        assert trap.fired.wait(60), f"the operator never reached the step: {step}"
        operator = OperatorProcess(proxy.kubeconfig_path, namespace, log).start()
        processes.append(operator)
        pods = jobs.wait_pods(
            "steps",
            functools.partial(_gang_running, old, attempt),
            what=f"attempt {attempt} Running after the operator died at: {step}",
        )
        job = jobs.wait_condition("PyTorchJob", "steps", "Running")
        gang = job["status"]["gangRestart"]
        assert (gang["attempt"], gang["infrastructure"]) == (attempt, attempt), (step, gang)
        assert job["status"]["replicaStatuses"]["Worker"]["restarts"] == 4, step
        assert set(jobs.pods("steps")) == set(pods) == {"steps-master-0", worker}, step
    jobs.exit("steps-master-0", 0)
    done = jobs.wait_condition("PyTorchJob", "steps", "Succeeded")
    assert done["status"]["replicaStatuses"]["Worker"]["restarts"] == 4
    assert done["status"]["gangRestart"]["infrastructure"] == 2


def _gang_status(job: str, attempt: int) -> Callable[[Request], bool]:
    """The status write that records gang attempt ``attempt`` of the job."""

    def matches(request: Request) -> bool:
        if request.method != "PATCH" or not request.path.endswith(f"/pytorchjobs/{job}/status"):
            return False
        gang = ((request.json() or {}).get("status") or {}).get("gangRestart") or {}
        return bool(gang.get("attempt") == attempt)

    return matches


def _gang_running(old: set[str], attempt: int, pods: dict[str, dict[str, Any]]) -> bool:
    """Both pods new (no uid in ``old``), of ``attempt``, Running, none being deleted."""
    return len(pods) == 2 and all(
        p["metadata"]["uid"] not in old
        and p["metadata"]["labels"].get(K.ATTEMPT_LABEL) == str(attempt)
        and p["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
        for p in pods.values()
    )


def _settled_after_restart(job: dict[str, Any] | None) -> bool:
    """Running, and no counted failure left to delete."""
    workers = ((job or {}).get("status") or {}).get("replicaStatuses", {}).get("Worker", {})
    running = condition(job, "Running") or {}
    return "countedFailures" not in workers and running.get("status") == "True"


def test_only_the_leader_acts_and_a_standby_takes_over(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    api_client: client.ApiClient,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    election = ("--leader-elect=true", "--leader-election-id=kubetrain-test")
    one = OperatorProcess(kubeconfig, namespace, tmp_path / "one.log", extra=election).start()
    processes.append(one)
    wait_for(lambda: one.metric("kubetrain_is_leader"), lambda v: v == 1, what="one leads")
    two = OperatorProcess(kubeconfig, namespace, tmp_path / "two.log", extra=election).start()
    processes.append(two)
    assert two.ready() == (200, "standby: waiting for the leader lease\n")

    jobs.create(pytorch_job("led", workers=1))
    jobs.wait_condition("PyTorchJob", "led", "Running")
    assert one.metric("kubetrain_jobs_created_total") == 1
    assert two.metric("kubetrain_jobs_created_total") == 0
    assert two.metric("kubetrain_is_leader") == 0
    holder = _holder(api_client, namespace)
    assert holder

    # A graceful stop hands the Lease over; the standby then reconciles.
    assert one.terminate() == 0
    wait_for(lambda: two.metric("kubetrain_is_leader"), lambda v: v == 1, what="two leads")
    assert _holder(api_client, namespace) not in (holder, None)
    jobs.exit("led-master-0", 0)
    jobs.wait_condition("PyTorchJob", "led", "Succeeded")
    assert two.metric("kubetrain_jobs_succeeded_total") == 1


def _holder(api_client: client.ApiClient, namespace: str) -> str | None:
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease("kubetrain-test", namespace)
    return lease.spec.holder_identity if lease.spec is not None else None


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_resumes(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    api_client: client.ApiClient,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    """SIGSTOP the leader past its Lease (15 s): the standby takes over. While the old
    leader is frozen, work piles up for it (its watches buffer the events). Resumed, it
    must not write a thing: it cannot prove its Lease is current, so every write is
    refused until it learns it lost, and then it exits."""
    election = ("--leader-elect=true", "--leader-election-id=kubetrain-test")
    one = OperatorProcess(kubeconfig, namespace, tmp_path / "one.log", extra=election).start()
    processes.append(one)
    wait_for(lambda: one.metric("kubetrain_is_leader"), lambda v: v == 1, what="one leads")
    two = OperatorProcess(kubeconfig, namespace, tmp_path / "two.log", extra=election).start()
    processes.append(two)
    jobs.create(pytorch_job("before", workers=1))
    jobs.wait_condition("PyTorchJob", "before", "Running")
    writes_before_pause = _right_after_a_renewal(one)

    one.pause()
    try:
        wait_for(
            lambda: two.metric("kubetrain_is_leader"),
            lambda v: v == 1,
            what="the standby to take the expired Lease",
            timeout=60,
        )
        # Work the frozen replica will find queued when it wakes up.
        jobs.create(pytorch_job("during", workers=1))
        jobs.wait_condition("PyTorchJob", "during", "Running")
        jobs.exit("before-master-0", 0)
        jobs.wait_condition("PyTorchJob", "before", "Succeeded")
    finally:
        one.resume()
    assert one.proc is not None
    assert one.proc.wait(timeout=30) == 1  # it learnt it lost the Lease, and stopped
    stopped = [
        json.loads(line)
        for line in one.logs().splitlines()
        if line.startswith("{") and json.loads(line).get("msg") == "stopped"
    ]
    assert stopped and stopped[-1]["api_writes"] == writes_before_pause
    # The new leader carries on undisturbed.
    jobs.exit("during-master-0", 0)
    jobs.wait_condition("PyTorchJob", "during", "Succeeded")
    assert two.metric("kubetrain_jobs_succeeded_total") == 2


def _settled(read: Callable[[], float]) -> float:
    """A counter's value once it stopped moving for a second (trailing Events sent)."""
    last = [read()]

    def observe() -> tuple[float, float]:
        previous, last[0] = last[0], read()
        return previous, last[0]

    _before, now = wait_for(
        observe, lambda pair: pair[0] == pair[1], what="writes to settle", interval=1.0
    )
    return now


def _right_after_a_renewal(leader: OperatorProcess) -> float:
    """The leader's write count just after it renewed its Lease, its other writes settled.
    Renewals are writes too, every 2 s (the retry period): a count read at a random moment
    can miss one sent a moment before a SIGSTOP (the metric counts a write once its
    response is back, the operator's stopped line when it is sent). Read just after one,
    the next is 2 s away, time enough to freeze the process with nothing in flight."""
    settled = _settled(leader.api_writes)
    return wait_for(
        leader.api_writes,
        lambda count: count > settled,
        what="the leader's next Lease renewal",
        interval=0.05,
        timeout=15,
    )


def _lease(api_client: client.ApiClient, namespace: str) -> client.V1LeaseSpec:
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease("kubetrain-test", namespace)
    assert lease.spec is not None
    return lease.spec


def _taken_over(
    api_client: client.ApiClient, namespace: str, old_holder: str, standby: OperatorProcess
) -> client.V1LeaseSpec:
    """The Lease once ``standby`` acts on it as the new leader."""
    wait_for(
        lambda: standby.metric("kubetrain_is_leader"),
        lambda v: v == 1,
        what="the standby to lead",
        timeout=60,
    )
    spec = _lease(api_client, namespace)
    assert spec.holder_identity not in (old_holder, "", None)
    return spec


def test_a_graceful_stop_hands_over_at_once_a_killed_leader_when_its_lease_expires(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    api_client: client.ApiClient,
    processes: list[OperatorProcess],
    tmp_path: Path,
    figures: list[str],
) -> None:
    """SIGTERM (a rolling update): the leader stops its workers, sends its last writes and
    releases the Lease, and the standby takes it at its next attempt, long before the
    Lease could have expired. SIGKILL (a crashed node): nothing is released, and the
    standby waits out the Lease (15 s). Handover times are measured on the Lease itself,
    from the signal to the new holder's ``acquireTime``."""
    election = ("--leader-elect=true", "--leader-election-id=kubetrain-test")

    def start(name: str) -> OperatorProcess:
        started = OperatorProcess(kubeconfig, namespace, tmp_path / f"{name}.log", extra=election)
        processes.append(started.start())
        return started

    one = start("one")
    wait_for(lambda: one.metric("kubetrain_is_leader"), lambda v: v == 1, what="one leads")
    two = start("two")
    before = _lease(api_client, namespace)
    assert before.renew_time is not None and before.lease_duration_seconds == 15

    signalled = datetime.now(UTC)
    assert one.terminate() == 0
    after_term = _taken_over(api_client, namespace, str(before.holder_identity), two)
    assert after_term.acquire_time is not None
    # Taken before the old leader's last renewal we saw could have expired: released.
    assert after_term.acquire_time < before.renew_time + timedelta(seconds=15)
    graceful = (after_term.acquire_time - signalled).total_seconds()

    three = start("three")
    assert three.ready() == (200, "standby: waiting for the leader lease\n")
    killed = datetime.now(UTC)
    two.kill()
    after_kill = _taken_over(api_client, namespace, str(after_term.holder_identity), three)
    assert after_kill.acquire_time is not None
    crash = (after_kill.acquire_time - killed).total_seconds()
    assert after_kill.lease_transitions == (after_term.lease_transitions or 0) + 1
    figures.append(
        f"leader handover: SIGTERM {graceful:.1f} s (Lease released), "
        f"SIGKILL {crash:.1f} s (Lease of 15 s expired)"
    )
