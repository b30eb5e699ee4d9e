"""The MPI launcher's batch Job on the real API server: its pod's startup gate is the
operator's planned wait, not a Warning (a gate someone else put there stays one), and the
Job carries the MPIJob's ``ttlSecondsAfterFinished`` as mpi-operator v0.8.0 sets it."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import keys as K
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import GPU_TOLERATION
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, mpi_job
from tests.integration.operator.running import SharedOperator

UPSTREAM = Path(__file__).parents[2] / "data/upstream/mpi-operator-v0.8.0"
EXAMPLES = sorted(p.relative_to(UPSTREAM).as_posix() for p in UPSTREAM.glob("*/*.yaml"))
#: A gate the job's author put on the launcher (as a queue or a policy engine would).
FOREIGN_GATE = "example.com/hold"


def _upstream(example: str) -> dict[str, Any]:
    """An upstream example; a pod asking for GPUs gets the toleration of the fake GPU
    nodes' taint (what a platform team adds), nothing else changes."""
    job: dict[str, Any] = parse_yaml((UPSTREAM / example).read_text(encoding="utf-8"))
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        pod_spec = spec["template"]["spec"]
        limits = [(c.get("resources") or {}).get("limits") or {} for c in pod_spec["containers"]]
        if any("nvidia.com/gpu" in lim for lim in limits):
            pod_spec.setdefault("tolerations", []).append(copy.deepcopy(GPU_TOLERATION))
    return job


def _launcher_pod(jobs: Jobs, job: str) -> dict[str, Any] | None:
    found = [
        p for p in jobs.pods(job).values() if p["metadata"]["labels"].get(K.JOB_ROLE) == "launcher"
    ]
    return found[0] if found else None


@pytest.mark.parametrize("example", EXAMPLES)
def test_upstream_mpijobs_get_no_warning_for_the_operators_own_startup_gate(
    operator: RunningOperator, jobs: Jobs, example: str
) -> None:
    job = _upstream(example)
    name = job["metadata"]["name"]
    jobs.create(job)
    # The launcher Job comes with the workers (AtStartup), its pod gated until they are
    # Ready: the API server marks it PodScheduled=False, reason SchedulingGated.
    running = jobs.wait_condition("MPIJob", name, "Running")
    # Events are sent in order: every Event queued before Running has been recorded.
    jobs.wait_event(name, "MPIJobRunning")
    events = jobs.events(name)
    assert [e["reason"] for e in events if e["type"] == "Warning"] == [], events
    created = condition(running, "Created") or {}
    assert "SchedulingGated" not in str(created.get("message")), created
    launcher = _launcher_pod(jobs, name)
    assert launcher is not None and not launcher["spec"].get("schedulingGates")


def test_a_gate_someone_else_put_on_the_launcher_stays_a_warning(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = mpi_job("held", workers=1)
    launcher_spec = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    launcher_spec["schedulingGates"] = [{"name": FOREIGN_GATE}]
    jobs.create(job)
    # The workers get Ready, the operator lifts its own gate; the author's stays.
    launcher = wait_for(
        lambda: _launcher_pod(jobs, "held"),
        lambda p: p is not None and p["spec"].get("schedulingGates") == [{"name": FOREIGN_GATE}],
        what="the launcher pod held by the author's gate only",
    )
    assert launcher is not None
    warning = jobs.wait_event("held", "SchedulingGated")
    assert warning["type"] == "Warning"
    assert f"(scheduling gates: {FOREIGN_GATE})" in warning["message"]
    assert K.STARTUP_GATE not in warning["message"]
    created = jobs.wait(
        "MPIJob",
        "held",
        lambda j: "SchedulingGated" in str((condition(j, "Created") or {}).get("message")),
        what="the Created condition naming the author's gate",
    )
    assert FOREIGN_GATE in str((condition(created, "Created") or {}).get("message"))
    assert jobs.state("MPIJob", "held") == "Created"


def test_the_launcher_job_carries_the_upstream_examples_ttl(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = _upstream("pi/pi.yaml")
    assert job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 60
    jobs.create(job)
    launchers = wait_for(
        lambda: jobs.batch_jobs("pi"), lambda j: "pi-launcher" in j, what="the launcher Job"
    )
    assert launchers["pi-launcher"]["spec"]["ttlSecondsAfterFinished"] == 60


def test_the_launcher_jobs_own_ttl_removes_it_and_the_mpijob_stays(
    operator: RunningOperator, shared_operator: SharedOperator, jobs: Jobs
) -> None:
    """Kubernetes' TTL controller deletes the finished launcher Job by itself, as under
    upstream (the operator is stopped then, so it cannot be the one), a minute after it
    finished at the earliest (the Job's TTL is never under 60 s, so the operator reads the
    outcome first); the operator, started again, neither recreates the Job nor errs. The
    shared operator runs the job, is stopped, and its restart is the one that looks again
    (the next tests share it)."""
    job = mpi_job("mttl", workers=1)
    job["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 2}
    try:
        jobs.create(job)
        jobs.wait_condition("MPIJob", "mttl", "Running")
        launcher = _launcher_pod(jobs, "mttl")
        assert launcher is not None
        jobs.exit(launcher["metadata"]["name"], 0)
        jobs.wait_condition("MPIJob", "mttl", "Succeeded")
    finally:
        operator.stop()
    assert jobs.batch_jobs("mttl")["mttl-launcher"]["spec"]["ttlSecondsAfterFinished"] == 60
    wait_for(
        lambda: jobs.batch_jobs("mttl"),
        lambda j: not j,
        what="the launcher Job deleted by its own ttlSecondsAfterFinished",
        timeout=120,
    )
    second = shared_operator.get()
    assert second is not operator
    time.sleep(3)  # resync and requeues: time to recreate it, were it to
    assert jobs.batch_jobs("mttl") == {}
    kept = jobs.get("MPIJob", "mttl")
    assert kept is not None and (condition(kept, "Succeeded") or {}).get("status") == "True"
    registry = second.operator.metrics.registry
    for error in ("not_found", "permanent", "temporary"):
        labels = {"kind": "MPIJob", "error": error}
        assert not registry.get_sample_value("kubetrain_reconcile_errors_total", labels)
