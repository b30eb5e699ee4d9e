"""The reconciler's order of writes and its error handling, on an in-memory cluster."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pytest

from kubetrain.controller.errors import ApiError
from kubetrain.controller.model import WRITE_BATCH
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.reconciler import Reconciler
from kubetrain.controller.sshkeys import ssh_secret_name
from tests.builders.observed import JOB_UID, NOW, mpi_raw, pod, pytorch_raw, tf_raw
from tests.unit.controller.memory_cluster import MemoryCluster

PLUGINS = build_registry(("PyTorchJob", "TFJob", "MPIJob"))


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def setup(raw: dict[str, Any]) -> tuple[MemoryCluster, Reconciler, tuple[str, str, str], Clock]:
    cluster = MemoryCluster()
    key = cluster.add_job(raw)
    clock = Clock()
    return cluster, Reconciler(cluster, cluster, PLUGINS, clock=clock), key, clock


def test_children_then_status_then_events() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    reconciler.reconcile(key)
    assert cluster.calls == [
        ("create", "Pod/job-master-0"),
        ("create", "Service/job-master-0"),
        ("create", "Service/job-worker-0"),
        ("status", "job"),
        ("event", "PyTorchJobCreated"),
    ]
    assert cluster.state(key) == "Created"
    # One Event for the job's creation: what was created and what the gate waits for.
    [created] = cluster.events
    assert created.message == (
        "PyTorchJob job is created. Created pod: job-master-0; 2 services: job-master-0, "
        "job-worker-0. Waiting for the master (job-master-0) to be Ready before creating the "
        "workers."
    )
    # The wait was announced with it: the next reconcile does not announce it again.
    reconciler.reconcile(key)
    assert [e.reason for e in cluster.events] == ["PyTorchJobCreated"]


def test_the_status_is_written_only_when_it_changed() -> None:
    cluster, reconciler, key, clock = setup(pytorch_raw(workers=1))
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-master-0"] = pod("job-master-0")
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = pod("job-worker-0")
    reconciler.reconcile(key)
    assert cluster.state(key) == "Running"
    cluster.calls.clear()
    clock.now += timedelta(seconds=30)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    assert cluster.calls == []


def test_a_child_the_api_server_rejects_fails_the_job() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.fail_next["Pod"] = ApiError(
        422,
        "Invalid",
        'Pod "job-master-0" is invalid: spec.containers[0].resources.requests',
        "PATCH /api/v1/pods",
    )
    result = reconciler.reconcile(key)
    assert result.requeue_after is None
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "InvalidSpec"
    assert "spec.containers[0].resources.requests" in failed["message"]
    assert [e.reason for e in cluster.events][-1] == "InvalidSpec"


def test_a_temporary_error_is_raised_for_a_retry_and_writes_no_status() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.fail_next["Service"] = ApiError(503, "ServiceUnavailable", "etcd is busy", "PATCH")
    with pytest.raises(ApiError):
        reconciler.reconcile(key)
    assert "status" not in cluster.jobs[key]
    assert (
        reconciler.metrics.reconcile_errors.labels(
            kind="PyTorchJob", error="temporary"
        )._value.get()
        == 1
    )


def test_a_restart_is_committed_to_the_status_before_the_pod_is_deleted() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1, restart_policy="ExitCode"))
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    reconciler.reconcile(key)
    cluster.calls.clear()
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", exit_code=137, reason="OOMKilled"
    )
    reconciler.reconcile(key)
    assert cluster.calls[:2] == [("status", "job"), ("delete", "Pod/job-worker-0")]
    assert cluster.jobs[key]["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    assert cluster.state(key) == "Restarting"
    # The deletion is not visible yet (a stale cache): the failure is not counted twice.
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", exit_code=137, reason="OOMKilled"
    )
    reconciler.reconcile(key)
    assert cluster.jobs[key]["status"]["replicaStatuses"]["Worker"]["restarts"] == 1
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    registry = reconciler.metrics.registry
    assert registry.get_sample_value("kubetrain_jobs_restarted_total", labels) == 1
    assert registry.get_sample_value("kubetrain_jobs_created_total", labels) == 1


class Crash(Exception):
    """The operator process dying at a precise step (nothing after it runs)."""


@pytest.mark.parametrize("crash_at", ["delete", "recreate"])
def test_a_restart_is_counted_once_whatever_step_a_crash_interrupts(crash_at: str) -> None:
    """Each reconciler stands for one operator process: its memory dies with it. The
    first one dies after writing the status but before deleting the failed pod, or after
    deleting it but before creating it again; a fresh one finishes the restart."""
    cluster, first, key, clock = setup(
        pytorch_raw(workers=1, restart_policy="ExitCode", run_policy={"backoffLimit": 1})
    )
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    first.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", "Failed", exit_code=137, reason="OOMKilled", uid="failed-uid"
    )

    def crash(*_args: Any) -> None:
        raise Crash

    setattr(cluster, "delete" if crash_at == "delete" else "create", crash)
    with pytest.raises(Crash):
        first.reconcile(key)
        first.reconcile(key)  # the recreation comes in the reconcile after the deletion
    worker = cluster.jobs[key]["status"]["replicaStatuses"]["Worker"]
    assert worker["restarts"] == 1 and worker["countedFailures"] == ["failed-uid"]
    delattr(cluster, "delete" if crash_at == "delete" else "create")  # writes go through

    second = Reconciler(cluster, cluster, PLUGINS, clock=clock)
    second.reconcile(key)  # a backoffLimit of 1 is not exceeded by the same failure
    if crash_at == "delete":
        assert "job-worker-0" not in cluster.children["Pod"]
        second.reconcile(key)
    assert cluster.children["Pod"]["job-worker-0"]["metadata"]["uid"] != "failed-uid"
    cluster.children["Pod"]["job-worker-0"] = pod("job-worker-0", uid="recreated")
    second.reconcile(key)
    worker = cluster.jobs[key]["status"]["replicaStatuses"]["Worker"]
    assert worker["restarts"] == 1 and "countedFailures" not in worker
    assert cluster.state(key) == "Running"


def test_repeated_problems_make_one_event() -> None:
    cluster, reconciler, key, clock = setup(pytorch_raw(workers=1))
    cluster.children["Pod"]["job-master-0"] = pod(
        "job-master-0", "Pending", unschedulable="0/4 nodes are available"
    )
    for _ in range(3):
        reconciler.reconcile(key)
        clock.now += timedelta(seconds=1)
    assert [e.reason for e in cluster.events].count("Unschedulable") == 1
    created = cluster.condition(key, "Created")
    assert created is not None and "Unschedulable: 0/4 nodes are available" in created["message"]


def test_a_job_managed_elsewhere_is_not_touched_and_said_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster, reconciler, key, _ = setup(
        pytorch_raw(run_policy={"managedBy": "kueue.x-k8s.io/multikueue"})
    )
    with caplog.at_level("INFO", logger="kubetrain"):
        for _ in range(3):
            reconciler.reconcile(key)
    assert cluster.calls == [("event", "ManagedByOtherController")]
    assert "status" not in cluster.jobs[key]
    event = cluster.events[0]
    assert event.name == "managed-elsewhere"  # one Event per job, even across restarts
    assert "kueue.x-k8s.io/multikueue" in event.message and "job" in event.message
    lines = [r for r in caplog.records if r.getMessage() == "left to another controller"]
    assert len(lines) == 1


def test_a_finished_job_is_deleted_when_its_ttl_passes() -> None:
    cluster, reconciler, key, clock = setup(
        pytorch_raw(workers=1, run_policy={"ttlSecondsAfterFinished": 60})
    )
    cluster.children["Pod"]["job-master-0"] = pod("job-master-0", "Succeeded")
    cluster.children["Pod"]["job-worker-0"] = pod("job-worker-0", "Succeeded")
    result = reconciler.reconcile(key)
    assert cluster.state(key) == "Succeeded"
    assert result.requeue_after == pytest.approx(60.05)
    clock.now += timedelta(seconds=60)
    reconciler.reconcile(key)
    assert ("delete-job", "job") in cluster.calls
    assert key not in cluster.jobs
    reconciler.reconcile(key)  # gone: nothing to do, nothing remembered
    assert reconciler.remembered() == 0


def test_in_place_restarts_are_counted_once_in_the_metrics() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    for name in ("job-master-0", "job-worker-0"):
        cluster.children["Pod"][name] = pod(name)
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-worker-0"] = pod(
        "job-worker-0", restarts=2, last_exit=(1, "Error")
    )
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    labels = {"kind": "PyTorchJob", "namespace": "ns"}
    assert (
        reconciler.metrics.registry.get_sample_value("kubetrain_jobs_restarted_total", labels) == 2
    )
    assert [e.reason for e in cluster.events].count("Error") == 1


def foreign(name: str, owner: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "uid": "theirs", **meta}}
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [{"controller": True, **owner}]
    return obj


def test_rejects_adopting_an_object_it_did_not_create() -> None:
    cluster, reconciler, key, _ = setup(mpi_raw(workers=1))
    user_config = foreign("job-config", labels={"team": "a"})
    cluster.foreign["ConfigMap"]["job-config"] = user_config
    before = copy.deepcopy(user_config)
    reconciler.reconcile(key)
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "ChildNameConflict"
    assert "ConfigMap ns/job-config already exists" in failed["message"]
    assert "not controlled by any object" in failed["message"]
    assert "ChildNameConflict" in [e.reason for e in cluster.events]
    assert cluster.foreign["ConfigMap"]["job-config"] == before  # untouched
    assert "job-config" not in cluster.children["ConfigMap"]
    assert not [c for c in cluster.calls if c[0] == "delete" and "job-config" in c[1]]


def test_rejects_an_object_another_controller_holds() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.foreign["Service"]["job-worker-0"] = foreign(
        "job-worker-0", {"kind": "Deployment", "name": "web", "uid": "d-1"}
    )
    reconciler.reconcile(key)
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "ChildNameConflict"
    assert "controlled by Deployment web" in failed["message"]


def test_waits_for_a_predecessors_child_to_be_collected() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.foreign["Service"]["job-worker-0"] = foreign(
        "job-worker-0", {"kind": "PyTorchJob", "name": "job", "uid": "an-earlier-uid"}
    )
    result = reconciler.reconcile(key)
    assert cluster.condition(key, "Failed") is None
    created = cluster.condition(key, "Created")
    assert created is not None and created["reason"] == "ChildNameConflict"
    assert "waiting for garbage collection" in created["message"]
    assert result.requeue_after == 2.0
    del cluster.foreign["Service"]["job-worker-0"]  # collected
    reconciler.reconcile(key)
    assert "job-worker-0" in cluster.children["Service"]
    assert cluster.condition(key, "Failed") is None


def test_a_child_of_the_same_job_missing_from_the_cache_is_still_reconciled() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    ours = {"kind": "PyTorchJob", "name": "job", "uid": JOB_UID}
    cluster.foreign["Service"]["job-master-0"] = foreign("job-master-0", ours)
    reconciler.reconcile(key)
    assert ("create-exists", "Service/job-master-0") in cluster.calls
    assert cluster.condition(key, "Failed") is None
    assert ("create", "Pod/job-master-0") in cluster.calls


def test_a_child_an_earlier_pass_created_gets_no_second_created_event() -> None:
    # The cache did not show the Service yet (an earlier pass created it): the create
    # finds it, and the Created Event does not name it: it was announced then.
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    ours = {"kind": "PyTorchJob", "name": "job", "uid": JOB_UID}
    cluster.foreign["Service"]["job-master-0"] = foreign("job-master-0", ours)
    reconciler.reconcile(key)
    [created] = [e.message for e in cluster.events if e.reason == "PyTorchJobCreated"]
    assert "Created pod: job-master-0; service: job-worker-0." in created


PSA = ApiError(
    403,
    "Forbidden",
    'pods "job-master-0" is forbidden: violates PodSecurity "restricted:latest": '
    'privileged (container "pytorch" must not set securityContext.privileged=true)',
    "POST /api/v1/namespaces/ns/pods",
)
QUOTA = ApiError(
    403,
    "Forbidden",
    'pods "job-master-0" is forbidden: exceeded quota: gpus, requested: '
    "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, limited: "
    "requests.nvidia.com/gpu=4",
    "POST /api/v1/namespaces/ns/pods",
)


def test_a_refused_pod_is_reported_at_once_and_fails_the_job_after_five_tries() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    delays = []
    for attempt in range(1, 5):
        cluster.fail_next["Pod"] = PSA
        delays.append(reconciler.reconcile(key).requeue_after)
        created = cluster.condition(key, "Created")
        assert created is not None and created["reason"] == "ChildRefused"
        assert f"try {attempt} of 5" in created["message"]
        assert "Pod ns/job-master-0" in created["message"]
        assert "violates PodSecurity" in created["message"]
        assert cluster.condition(key, "Failed") is None
    assert delays == [2.0, 4.0, 8.0, 16.0]
    warnings = [e for e in cluster.events if e.type == "Warning" and e.reason == "ChildRefused"]
    assert len(warnings) == 4 and "violates PodSecurity" in warnings[0].message
    cluster.fail_next["Pod"] = PSA
    reconciler.reconcile(key)
    failed = cluster.condition(key, "Failed")
    assert failed is not None and failed["reason"] == "ChildRefused"
    assert "violates PodSecurity" in failed["message"]


def test_a_quota_refusal_waits_without_failing_the_job() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    for _ in range(8):
        cluster.fail_next["Pod"] = QUOTA
        result = reconciler.reconcile(key)
    created = cluster.condition(key, "Created")
    assert created is not None and created["reason"] == "ChildRefused"
    assert (
        "exceeded quota" in created["message"] and "until the quota frees up" in created["message"]
    )
    assert cluster.condition(key, "Failed") is None
    assert result.requeue_after == 60.0
    reconciler.reconcile(key)  # the quota freed up
    assert "job-master-0" in cluster.children["Pod"]


def test_every_mpi_child_comes_in_the_first_reconcile_the_secret_first() -> None:
    """No pass is spent naming the SSH Secret: its name comes from the job's uid, so the
    first reconcile creates it, alone and first, then every other child, and records the
    name with its status."""
    cluster, reconciler, key, _ = setup(mpi_raw(workers=1))
    reconciler.reconcile(key)
    name = ssh_secret_name("job-ssh-", JOB_UID)
    assert list(cluster.children["Secret"]) == [name]
    assert cluster.jobs[key]["status"]["sshAuthSecretName"] == name
    assert "job-worker-0" in cluster.children["Pod"] and "job-launcher" in cluster.children["Job"]
    calls = [target for verb, target in cluster.calls if verb == "create"]
    assert calls[0] == f"Secret/{name}"  # before anything that mounts it
    worker = cluster.children["Pod"]["job-worker-0"]
    (volume,) = [v for v in worker["spec"]["volumes"] if v["name"] == "ssh-auth"]
    assert volume["secret"]["secretName"] == name
    reconciler.reconcile(key)
    assert list(cluster.children["Secret"]) == [name]  # never made again


def test_a_secret_create_whose_answer_was_lost_is_not_made_twice() -> None:
    """The API server made the Secret, but the reconcile failed after it (a pod create
    refused, the operator died) before the status named it: the next pass computes the
    same name from the uid, and the API server's 409 is taken as done."""
    cluster, reconciler, key, _ = setup(mpi_raw(workers=1))
    cluster.fail_next["Pod"] = ApiError(503, "ServiceUnavailable", "the API server went away")
    with pytest.raises(ApiError):
        reconciler.reconcile(key)
    name = ssh_secret_name("job-ssh-", JOB_UID)
    assert list(cluster.children["Secret"]) == [name]
    assert "sshAuthSecretName" not in (cluster.jobs[key].get("status") or {})
    fresh = Reconciler(cluster, cluster, PLUGINS, clock=Clock())  # a new operator process
    fresh.reconcile(key)  # the Secret is created again: taken, so it is there
    assert list(cluster.children["Secret"]) == [name]
    assert "job-worker-0" in cluster.children["Pod"]
    assert cluster.jobs[key]["status"]["sshAuthSecretName"] == name


def test_pods_are_not_created_when_their_secret_could_not_be() -> None:
    cluster, reconciler, key, _ = setup(mpi_raw(workers=1))
    cluster.fail_next["Secret"] = ApiError(503, "ServiceUnavailable", "the API server went away")
    with pytest.raises(ApiError):
        reconciler.reconcile(key)
    assert not cluster.children["Secret"] and not cluster.children["Pod"]
    assert not cluster.children["Job"]


def test_a_gate_waiting_only_for_the_service_it_just_created_looks_again_at_once() -> None:
    """The stall: the master pod is Ready, but its Service is created by this very
    reconcile (the gate was evaluated before). The job must not wait for the timeout."""
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    cluster.children["Pod"]["job-master-0"] = pod("job-master-0")
    result = reconciler.reconcile(key)
    assert ("create", "Service/job-master-0") in cluster.calls
    assert "job-worker-0" not in cluster.children["Pod"]
    assert result.requeue_after is not None and result.requeue_after <= 0.05
    assert ("Service", "job-master-0") in cluster.awaited[key]
    reconciler.reconcile(key)
    assert "job-worker-0" in cluster.children["Pod"]


def test_each_pod_exit_is_recorded_once() -> None:
    cluster, reconciler, key, _ = setup(pytorch_raw(workers=1))
    reconciler.reconcile(key)
    cluster.children["Pod"]["job-master-0"] = pod("job-master-0")
    cluster.children["Pod"]["job-worker-0"] = pod("job-worker-0", "Failed", exit_code=3)
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    exits = [e.message for e in cluster.events if e.reason == "ExitedWithCode"]
    assert exits == ["Pod: ns.job-worker-0 exited with code 3"]


def test_a_large_job_gets_its_children_in_batches_with_progress_in_its_status() -> None:
    """120 Workers and 30 PS (300 children): each reconcile writes one batch and asks to
    be looked at again at once; the Created condition counts the pods so far."""
    cluster, reconciler, key, _ = setup(tf_raw(workers=120, ps=30))
    passes = []
    while True:
        before = sum(len(cluster.children[k]) for k in ("Pod", "Service"))
        result = reconciler.reconcile(key)
        written = sum(len(cluster.children[k]) for k in ("Pod", "Service")) - before
        created = cluster.condition(key, "Created")
        assert created is not None
        passes.append((written, result.requeue_after, created["message"]))
        if result.requeue_after is None:
            break
        assert len(passes) < 20, passes
    assert [w for w, _, _ in passes] == [WRITE_BATCH] * 6
    assert "Creating its children, 50 per pass: 25 of 150 pods so far." in passes[0][2]
    assert "125 of 150 pods so far." in passes[4][2]
    # The last batch completes the job's children; the message no longer counts.
    assert "Creating" not in passes[-1][2]
    assert len(cluster.children["Pod"]) == len(cluster.children["Service"]) == 150


def test_a_large_job_builds_only_the_children_of_one_batch() -> None:
    """The plugin's children are built lazily: a pass stops at the batch."""
    plugin = PLUGINS["TFJob"]
    built = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(plugin, name)

        def build(self, job: Any, observed: Any, gate: Any) -> Any:
            for child in plugin.build(job, observed, gate):
                built.append(child["metadata"]["name"])
                yield child

    cluster = MemoryCluster()
    key = cluster.add_job(tf_raw(workers=1000))
    counting = {**PLUGINS, "TFJob": Counting()}
    Reconciler(cluster, cluster, counting, clock=Clock()).reconcile(key)
    assert len(cluster.children["Pod"]) == WRITE_BATCH // 2
    assert len(built) <= WRITE_BATCH + 1
