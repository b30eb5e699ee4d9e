"""A hang, a suspension and Kueue's preemption of training PyTorchJobs on the real node, with
real torch.distributed ranks that report their step and checkpoints to the operator's
progress server (the operator runs as its Deployment's pod):

- job ``hang`` (no queue): its worker stopped by SIGSTOP (a rank that hangs: its pod stays
  Running, the master waits in its all-reduce, nobody reports). The operator restarts the
  gang once the progress timeout passes, naming the last report; the new gang resumes
  from the last checkpoint, which the operator passed to it. Then it is suspended: the
  ranks checkpoint on SIGTERM and report it, and the resumed job starts from exactly the
  step it stopped at;
- job ``queued`` (the real Kueue, a ClusterQueue fitting one job): preempted by a
  higher-priority job, it checkpoints on SIGTERM, and once readmitted it resumes from that
  step: no step is redone.

Every job succeeds with both ranks on the same weights; each resume's step is the step the
job last reported, as the log's ``resume step=`` and ``checkpoint_reported=`` say."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.kueue import QUEUE_NAME_LABEL, Kueue
from cluster.local import LocalCluster
from kubetrain.api import keys as K
from tests.clusters import ClusterClients
from tests.integration.kube import condition, wait_for
from tests.integration.operator.jobs import Jobs
from tests.realnode.workloads import (
    CHECKPOINT,
    PRIORITY_LABEL,
    QUEUE,
    TRAINING_TIMEOUT,
    checkpointing,
    final_lines,
    jobs_in,
    local_queue,
    node_directory,
    queue_objects,
    sample,
    sized,
    started_log,
    wait_finished,
)

pytestmark = pytest.mark.usefixtures("installed_stack")

TIMEOUT = 12
#: The master's resume line: the step, the gang attempt (none in the first) and the
#: checkpoint the operator passed.
RESUME = re.compile(r"resume step=(\d+) .*?(?:attempt=(\d+) .*?)?checkpoint_reported=(\d+)")


def _list(items: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.fixture
def kueue(real_node_cluster: LocalCluster, node_namespace: str) -> Iterator[Kueue]:
    """The real Kueue against the real node's control plane, with the queue objects and
    the test namespace's LocalQueue; its webhooks removed afterwards."""
    kueue = Kueue(real_node_cluster, integrations=("kubeflow.org/pytorchjob",))
    kueue.start()
    try:
        objects = [*queue_objects(), local_queue(node_namespace)]
        real_node_cluster.kubectl("apply", "--server-side", "-f", "-", input=_list(objects))
        yield kueue
    finally:
        kueue.stop()


def _job(
    stack: Path, namespace: str, name: str, directory: Path, *, steps: int, delay: float = 0.3
) -> dict[str, Any]:
    job = sample(stack, "PyTorchJob", namespace)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {K.PROGRESS_TIMEOUT_ANNOTATION: str(TIMEOUT)}
    return sized(checkpointing(job, directory, steps=steps, every=5, delay=delay))


def _queued(job: dict[str, Any], priority: str) -> dict[str, Any]:
    job["metadata"]["labels"] = {QUEUE_NAME_LABEL: QUEUE, PRIORITY_LABEL: priority}
    return job


def _ours(jobs: Jobs, name: str) -> dict[str, Any]:
    job = jobs.get("PyTorchJob", name)
    assert job is not None
    status: dict[str, Any] = job.get("status") or {}
    failed = condition(job, "Failed") or {}
    assert failed.get("status") != "True", f"{name} failed: {failed}"
    return status


def _reported_checkpoint(jobs: Jobs, name: str) -> int:
    """The last checkpoint step the job reported, once it reported one."""
    found = wait_for(
        lambda: (_ours(jobs, name).get("progress") or {}).get("checkpoint") or {},
        lambda point: "step" in point,
        what=f"{name} to report a checkpoint",
        timeout=TRAINING_TIMEOUT,
    )
    return int(found["step"])


def _log(clients: ClusterClients, namespace: str, name: str) -> str:
    return started_log(clients, namespace, f"{name}-master-0")


def _resumed(clients: ClusterClients, namespace: str, name: str, attempt: int) -> tuple[int, int]:
    """(the step the master resumed at, the checkpoint the operator passed it) once the
    master of ``attempt`` logged a step after resuming."""

    def resume() -> tuple[int, int] | None:
        log = _log(clients, namespace, name)
        found = [m for m in RESUME.finditer(log) if int(m[2] or 0) == attempt]
        if not found or "\nstep=" not in log[found[-1].end() :]:
            return None
        return int(found[-1][1]), int(found[-1][3])

    what = f"{name}'s attempt {attempt} to resume and train"
    found = wait_for(resume, bool, what=what, timeout=TRAINING_TIMEOUT, interval=0.5)
    assert found is not None
    return found


def _suspended(jobs: Jobs, name: str) -> None:
    wait_for(
        lambda: jobs.get("PyTorchJob", name),
        lambda j: (condition(j, "Suspended") or {}).get("status") == "True" and not jobs.pods(name),
        what=f"{name} suspended, its pods gone",
        timeout=120,
    )


def test_a_hung_job_restarts_and_suspended_or_preempted_jobs_resume_where_they_stopped(
    kueue: Kueue,
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
) -> None:
    node = real_node_cluster.real_node
    assert node is not None
    clients, namespace = real_node_clients, node_namespace
    jobs = jobs_in(clients, namespace)
    directories = [node_directory(f"kubetrain-{n}-") for n in ("hang", "queued", "urgent")]
    jobs.create(_job(installed_stack, namespace, "hang", directories[0], steps=60))
    jobs.create(
        _queued(_job(installed_stack, namespace, "queued", directories[1], steps=150), "batch")
    )

    # The queued job is preempted by an urgent one once it checkpointed: it checkpoints on
    # SIGTERM and reports it.
    _reported_checkpoint(jobs, "queued")
    urgent = _queued(_job(installed_stack, namespace, "urgent", directories[2], steps=15), "urgent")
    jobs.create(urgent)
    _suspended(jobs, "queued")
    preempted = _ours(jobs, "queued")["progress"]
    assert preempted["checkpoint"]["step"] == preempted["step"], preempted

    # The hang: the worker's processes stopped; the master waits in its all-reduce.
    before_hang = _reported_checkpoint(jobs, "hang")
    pod = jobs.pods("hang")["hang-worker-0"]
    container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    stopped = time.monotonic()
    node.images.ctr("task", "kill", "--all", "--signal", "SIGSTOP", container)
    event = jobs.wait_event("hang", "HangRestart", timeout=TIMEOUT + 45)
    detected = time.monotonic() - stopped
    assert "no progress report for" in event["message"], event["message"]
    assert "last: step " in event["message"] and "from " in event["message"], event["message"]
    state = _ours(jobs, "hang")["gangRestart"]
    assert (state["attempt"], state["hangs"], state["reason"]) == (1, 1, "Hang"), state
    at_hang = _ours(jobs, "hang")["progress"]["checkpoint"]["step"]
    assert at_hang >= before_hang
    step, passed = _resumed(clients, namespace, "hang", 1)
    # It resumes at the last checkpoint it reported, which the operator passed on.
    assert step == passed == at_hang, (step, passed, at_hang)

    # The suspension: the ranks stop after a step, checkpoint it and report it.
    jobs.patch("PyTorchJob", "hang", {"spec": {"runPolicy": {"suspend": True}}})
    _suspended(jobs, "hang")
    stopped_at = _ours(jobs, "hang")["progress"]
    assert stopped_at["checkpoint"]["step"] == stopped_at["step"], stopped_at
    jobs.patch("PyTorchJob", "hang", {"spec": {"runPolicy": {"suspend": False}}})
    step, passed = _resumed(clients, namespace, "hang", 1)
    assert step == passed == stopped_at["step"], (step, passed, stopped_at)

    # Readmitted once the urgent job is done: it goes on from its SIGTERM checkpoint.
    assert (condition(wait_finished(jobs, "PyTorchJob", "urgent"), "Succeeded") or {}).get(
        "status"
    ) == "True"
    step, passed = _resumed(clients, namespace, "queued", 0)
    assert step == passed == preempted["step"], (step, passed, preempted)

    for name in ("hang", "queued"):
        done = wait_finished(jobs, "PyTorchJob", name)
        log = _log(clients, namespace, name)
        assert (condition(done, "Succeeded") or {}).get("status") == "True", log[-3000:]
        worker = started_log(clients, namespace, f"{name}-worker-0")
        digests = final_lines(log) | final_lines(worker)
        assert sorted(digests) == [0, 1] and len(set(digests.values())) == 1, digests
        goodput = done["status"]["goodput"]
        assert goodput["faults"] == (2 if name == "hang" else 1), goodput
        assert 0 < float(goodput["ratio"]) <= 1, goodput
        assert CHECKPOINT.search(log), log[-2000:]
    print(f"hang: SIGSTOP -> HangRestart Event {detected:.1f} s (timeout {TIMEOUT} s)")
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)
