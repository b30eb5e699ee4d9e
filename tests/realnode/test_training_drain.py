"""A drain of the real node under a training PyTorchJob and a TrainJob submitted with the
Kubeflow SDK (``TrainerClient().train(...)``, a checkpoint volume added with the SDK's
``RuntimePatch`` option), with real torch.distributed processes in real pods:
``kubectl drain`` evicts their pods (the Eviction API, each with its termination grace),
each gang restarts as its job's next attempt, its pods wait Pending while the node is
cordoned, and after ``kubectl uncordon`` both resume and finish every step.

The trainers get SIGTERM and checkpoint the step they finished (the PyTorchJob's
directly, the TrainJob's through torchrun, which the SDK's ``bash -c`` script ends in), so
each resumes where it stopped: every step logged before the drain is kept, and at most
the checkpoint interval could have been trained twice. The PyTorchJob's ``backoffLimit``
is 0: the eviction was the infrastructure's, so had it been counted the job would have
failed; both jobs' status counts the restart as an infrastructure one.

Upstream (training-operator v1.9) recreates each evicted pod on its own and counts it
against ``backoffLimit``: with 0 the job fails.

(The file is named to run after ``test_helm_upgrade.py``, which needs the operator not
installed yet: the tier runs its files in name order.)"""

from __future__ import annotations

import functools
import os
import re
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cluster.local import LocalCluster
from kubetrain.api import keys as K
from tests.clusters import ClusterClients
from tests.integration.kube import condition, wait_for
from tests.integration.operator.jobs import Jobs
from tests.integration.operator.sdk_users import Sdk, scientist_env
from tests.integration.sdk import run_sdk
from tests.realnode.workloads import (
    CHECKPOINT,
    TRAINING_TIMEOUT,
    checkpointing,
    final_lines,
    jobs_in,
    node_directory,
    pod_log,
    sample,
    started_log,
    wait_finished,
)

pytestmark = pytest.mark.usefixtures("installed_stack")

STEPS = 60
EVERY = 5
RESUMED = re.compile(r"resume step=(\d+) .* attempt=1 reason=(\w+)")
STEP = re.compile(r"^step=(\d+) ", re.MULTILINE)
#: CPU each pod asks for: the four fit the real node (2 cores) beside the operator.
CPU = "300m"
#: The label both jobs' pods carry, for ``kubectl drain --pod-selector``.
DRAIN_LABEL = "kubetrain-test/drain"


def _checkpointing(job: dict[str, Any], directory: Path, label: str) -> dict[str, Any]:
    """The sample, slowed to half a second a step, checkpointing every EVERY steps to
    ``directory``; backoffLimit 0; its pods labelled for the drain and small enough to
    share the node with the TrainJob's."""
    job["spec"].setdefault("runPolicy", {})["backoffLimit"] = 0
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {}).setdefault("labels", {})[DRAIN_LABEL] = label
        container = spec["template"]["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": CPU, "memory": "1Gi"}}
    return checkpointing(job, directory, steps=STEPS, every=EVERY, delay=0.5)


#: How many drains the test runs (``benchmarks/drain_recovery.py`` asks for more, to time
#: them); each prints its figures.
TRIALS = int(os.environ.get("KUBETRAIN_DRAIN_TRIALS", "1"))


class Trained:
    """One of the drained jobs: its rank 0's log (the current pod's), read through the
    kubelet, and its state."""

    def __init__(self, jobs: Jobs, clients: ClusterClients, kind: str, name: str) -> None:
        self.jobs, self.clients, self.kind, self.name = jobs, clients, kind, name

    def rank0(self) -> str | None:
        """The name of the pod running rank 0 of the newest attempt."""
        pods = [
            p
            for p in self.jobs.pods(self.name).values()
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"].startswith(
                f"{self.name}-master-0" if self.kind == "PyTorchJob" else f"{self.name}-node-0-0"
            )
        ]
        return (
            max(pods, key=lambda p: p["metadata"]["creationTimestamp"])["metadata"]["name"]
            if pods
            else None
        )

    def log(self) -> str:
        pod = self.rank0()
        return "" if pod is None else started_log(self.clients, self.jobs.namespace, pod)

    def saved(self) -> list[int]:
        current = self.jobs.get(self.kind, self.name) or {}
        failed = condition(current, "Failed") or {}
        assert failed.get("status") != "True", f"{self.name} failed before its drain: {failed}"
        return [int(m) for m in CHECKPOINT.findall(self.log())]

    def pods_of_attempt(self, attempt: str) -> dict[str, dict[str, Any]]:
        return {
            n: p
            for n, p in self.jobs.pods(self.name).items()
            if p["metadata"]["labels"].get(K.ATTEMPT_LABEL, "0") == attempt
        }


def _gang_restart(trained: Trained, drain: Future[Any]) -> dict[str, Any]:
    """The job's GangRestart Event; a failed drain, or what the pods look like, if none
    comes within a minute."""

    def look() -> list[dict[str, Any]]:
        if drain.done():
            drain.result()  # raises what kubectl said if it failed
        events = trained.jobs.events(trained.name)
        return [e for e in events if e.get("reason") == "GangRestart"]

    try:
        return wait_for(look, bool, what=f"{trained.name}'s GangRestart Event", timeout=60)[-1]
    except AssertionError as error:
        pods = {
            n: (p["status"].get("phase"), p["metadata"].get("deletionTimestamp"))
            for n, p in trained.jobs.pods(trained.name).items()
        }
        events = [(e.get("reason"), e.get("message")) for e in trained.jobs.events(trained.name)]
        raise AssertionError(f"{error}; pods: {pods}; events: {events}") from None


def _kubetrain_status(trained: Trained, job: dict[str, Any]) -> dict[str, Any]:
    """kubetrain's status of the job: a v1 job's own, a TrainJob's ``status.kubetrain``
    (its ``status.conditions`` are upstream's)."""
    status = dict(job.get("status") or {})
    return dict(status.get("kubetrain") or {}) if trained.kind == "TrainJob" else status


def _restarting(trained: Trained, job: dict[str, Any]) -> str:
    """The message of kubetrain's Restarting condition on the job, or ''."""
    found = condition({"status": _kubetrain_status(trained, job)}, "Restarting") or {}
    return str(found.get("message") or "")


def _unschedulable(trained: Trained, job: dict[str, Any]) -> bool:
    """Whether the Restarting condition says the new pods cannot be scheduled."""
    return "Unschedulable" in _restarting(trained, job)


def _new_gang_pending(old: set[str], pods: dict[str, dict[str, Any]]) -> bool:
    """Whether ``pods`` are a new gang (no uid in ``old``), all Pending."""
    return (
        bool(pods)
        and not old & {p["metadata"]["uid"] for p in pods.values()}
        and all(p["status"].get("phase") == "Pending" for p in pods.values())
    )


def _after_resume(trained: Trained) -> str:
    """What rank 0 logged after its resume line."""
    return trained.log().partition("resume step=")[2]


def test_drained_jobs_wait_then_resume_from_their_checkpoints(
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
    node_name: str,
    tmp_path: Path,
) -> None:
    sdk = Sdk(scientist_env(real_node_cluster.kubeconfig, node_namespace, tmp_path))
    for trial in range(TRIALS):
        figures = _drain_once(
            f"drained-{trial}",
            sdk,
            installed_stack,
            real_node_cluster,
            real_node_clients,
            node_namespace,
            node_name,
        )
        print(
            f"drain trial {trial + 1}: PyTorchJob: eviction -> new gang Pending "
            f"{figures[0]:.1f} s; uncordon -> training again {figures[1]:.1f} s; "
            f"TrainJob: uncordon -> training again {figures[2]:.1f} s"
        )


def _drain_once(
    name: str,
    sdk: Sdk,
    installed_stack: Path,
    real_node_cluster: LocalCluster,
    real_node_clients: ClusterClients,
    node_namespace: str,
    node_name: str,
) -> tuple[float, float, float]:
    """One drain under a training PyTorchJob and an SDK TrainJob, checked; (seconds from
    the drain's start to the PyTorchJob's new gang Pending, seconds from the uncordon to
    the first step each job trained after resuming)."""
    jobs = jobs_in(real_node_clients, node_namespace)
    directories = {kind: node_directory("kubetrain-drain-") for kind in ("PyTorchJob", "TrainJob")}
    # The TrainJob first: its pods take longer to start (torchrun, the SDK's script).
    submitted = sdk(
        *("train-checkpointing", "--runtime", "torch-distributed", "--num-nodes", "2"),
        *("--steps", str(STEPS), "--every", str(EVERY)),
        *("--checkpoint-dir", str(directories["TrainJob"]), "--label", f"{DRAIN_LABEL}={name}"),
        *("--cpu", CPU),
    )["name"]
    job = sample(installed_stack, "PyTorchJob", node_namespace)
    job["metadata"]["name"] = name
    jobs.create(_checkpointing(job, directories["PyTorchJob"], name))
    trained = [
        Trained(jobs, real_node_clients, "PyTorchJob", name),
        Trained(jobs, real_node_clients, "TrainJob", submitted),
    ]

    before = {
        t.kind: wait_for(
            t.saved,
            lambda s: len(s) >= 2,
            what=f"two checkpoints of {t.name}",
            timeout=TRAINING_TIMEOUT,
        )
        for t in trained
    }
    old = {t.kind: {p["metadata"]["uid"] for p in t.jobs.pods(t.name).values()} for t in trained}
    last_step = {t.kind: max(int(s) for s in STEP.findall(t.log())) for t in trained}
    drained = time.monotonic()
    to_pending = 0.0
    # kubectl drain returns once every evicted pod is gone (the TrainJob's only at the end
    # of their grace): it runs beside the checks, which time the PyTorchJob's own recovery.
    drain = ThreadPoolExecutor(1).submit(
        real_node_cluster.kubectl,
        "drain",
        node_name,
        f"--pod-selector={DRAIN_LABEL}={name}",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    )
    try:
        for t in trained:
            # The gang restarted as attempt 1 and waits, Pending, for a schedulable node.
            event = _gang_restart(t, drain)
            assert "infrastructure restarts used: 1 of 10" in event["message"], event["message"]
            pending = jobs.wait_pods(
                t.name,
                functools.partial(_new_gang_pending, old[t.kind]),
                what=f"{t.name}'s new gang Pending on the cordoned node",
                timeout=90,
            )
            if t.kind == "PyTorchJob":
                to_pending = time.monotonic() - drained
            labels = {p["metadata"]["labels"].get(K.ATTEMPT_LABEL) for p in pending.values()}
            assert labels == {"1"}, labels
            # The Restarting condition says why, and what the new pods wait for.
            waiting = jobs.wait(
                t.kind,
                t.name,
                functools.partial(_unschedulable, t),
                what=f"{t.name}'s Restarting condition to say its new pods are unschedulable",
                timeout=30,
            )
            message = _restarting(t, waiting or {})
            assert "as attempt 1" in message and "Waiting: pod " in message, message
        drain.result(timeout=150)
    finally:
        real_node_cluster.kubectl("uncordon", node_name)
    uncordoned = time.monotonic()
    to_training = {}
    for t in trained:
        # Training again: a step logged after the resume line.
        wait_for(
            functools.partial(_after_resume, t),
            lambda after: "step=" in after.partition("\n")[2],
            what=f"{t.name} to train again after resuming",
            timeout=TRAINING_TIMEOUT,
            interval=0.2,
        )
        to_training[t.kind] = time.monotonic() - uncordoned

    pytorch = trained[0]
    done = wait_finished(jobs, "PyTorchJob", name)
    log = pytorch.log()
    assert (condition(done, "Succeeded") or {}).get("status") == "True", (
        done["status"],
        log[-3000:],
    )
    # It checkpointed the step it finished on SIGTERM and resumed there: every step it
    # had logged before the drain was kept.
    resumed = RESUMED.search(log)
    assert resumed is not None, log[-3000:]
    assert int(resumed.group(1)) >= last_step["PyTorchJob"], (resumed.group(0), last_step)
    assert resumed.group(2) == "EvictionByEvictionAPI", resumed.group(0)
    assert STEP.findall(log)[0] == str(int(resumed.group(1)) + 1), log[-3000:]
    digests = final_lines(log) | final_lines(
        pod_log(real_node_clients, node_namespace, f"{name}-worker-0")
    )
    assert sorted(digests) == [0, 1] and len(set(digests.values())) == 1, digests

    for t in trained:
        gang = _kubetrain_status(t, jobs.get(t.kind, t.name) or {}).get("gangRestart") or {}
        assert (gang.get("attempt"), gang.get("infrastructure")) == (1, 1), (t.name, gang)

    # The TrainJob, as its data scientist sees it through the SDK.
    finished = run_sdk(
        "trainer_v2",
        *("wait", "--name", submitted, "--status", "Complete", "--status", "Failed"),
        *("--timeout", str(int(TRAINING_TIMEOUT))),
        env=sdk.env,
        timeout=TRAINING_TIMEOUT + 60,
    )
    assert finished.get("job", {}).get("status") == "Complete", finished
    lines = "\n".join(sdk("logs", "--name", submitted, "--step", "node-0")["lines"])
    resumed = RESUMED.search(lines)
    assert resumed is not None, lines[-3000:]
    step = int(resumed.group(1))
    # Back to the step it checkpointed on SIGTERM (at worst its last periodic one).
    assert step >= max(before["TrainJob"]), (step, before["TrainJob"])
    assert step > last_step["TrainJob"] - EVERY, (step, last_step)
    assert resumed.group(2) == "EvictionByEvictionAPI", resumed.group(0)
    # Its trainer reported its checkpoints through the progress server, and the operator
    # handed the last one it heard of to the resumed pods (the SIGTERM one may not have
    # reached it: the drain evicts the operator's own pods too).
    line = lines[resumed.start() :].splitlines()[0]
    passed = re.search(r"checkpoint_reported=(\d+)", line)
    assert passed is not None, line
    assert step - EVERY <= int(passed.group(1)) <= step, (line, step)
    assert f"final rank=0 step={STEPS} " in lines, lines[-3000:]
    for directory in directories.values():
        shutil.rmtree(directory, ignore_errors=True)
    return to_pending, to_training["PyTorchJob"], to_training["TrainJob"]
