"""The TrainJob through the reconciler, on the in-memory cluster: the status the Kubeflow
SDK reads, a runtime that is missing or makes the job invalid, the runtime pinned at the
first reconcile, the runtime's in-use annotation, and runtimePatches' times."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import yaml

from kubetrain.api import keys as K
from kubetrain.controller.conditions import format_time
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.plugins.trainjob_status import CODEC
from kubetrain.controller.reconciler import Reconciler
from kubetrain.controller.runtimes import in_use_patch
from kubetrain.manifest import parse_yaml, parse_yaml_all
from tests.builders.observed import NOW, pod, stamp
from tests.builders.trainer import UPSTREAM_TRAINER, torch_runtime
from tests.unit.controller.memory_cluster import MemoryCluster

PLUGINS = build_registry(("PyTorchJob", "TFJob", "MPIJob", "TrainJob"))
RUNTIME_KEY = ("ClusterTrainingRuntime", "", "torch")

RUNTIME = torch_runtime()


def trainjob(created_ago: float = 5) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "ns",
            "uid": "tj-uid",
            "creationTimestamp": stamp(created_ago),
        },
        "spec": {"runtimeRef": {"name": "torch"}},
    }


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> Any:
        return self.now


def setup(
    *, with_runtime: bool = True, created_ago: float = 5, runtime: dict[str, Any] | None = None
) -> tuple[MemoryCluster, Reconciler, Any, Clock]:
    cluster = MemoryCluster()
    if with_runtime:
        cluster.runtimes[RUNTIME_KEY] = copy.deepcopy(runtime or RUNTIME)
    key = cluster.add_job(trainjob(created_ago))
    clock = Clock()
    return cluster, Reconciler(cluster, cluster, PLUGINS, clock=clock), key, clock


def node_pod(name: str, phase: str = "Running", **kw: Any) -> dict[str, Any]:
    return pod(name, phase, owner_uid="tj-uid", owner_kind="TrainJob", **kw)


def test_no_condition_until_the_end_then_complete() -> None:
    cluster, reconciler, key, _ = setup()
    reconciler.reconcile(key)
    assert set(cluster.children["Pod"]) == {"tj-node-0-0", "tj-node-0-1"}
    status = cluster.jobs[key]["status"]
    assert "conditions" not in status and status["state"] == "Created"
    for name in ("tj-node-0-0", "tj-node-0-1"):
        cluster.children["Pod"][name] = node_pod(name)
    reconciler.reconcile(key)
    status = cluster.jobs[key]["status"]
    assert "conditions" not in status  # the SDK reports Running only without one
    assert (status["state"], status["nodes"], status["readyNodes"]) == ("Running", 2, 2)
    # Counted in Jobs, as JobSet counts them: the node replicated job is one Job.
    assert status["jobsStatus"] == [
        {"name": "node", "active": 1, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0}
    ]
    for name in ("tj-node-0-0", "tj-node-0-1"):
        cluster.children["Pod"][name] = node_pod(name, "Succeeded", exit_code=0, reason="Completed")
    reconciler.reconcile(key)
    status = cluster.jobs[key]["status"]
    (complete,) = status["conditions"]
    # Upstream's reason (JobSet's); kubetrain's own stays in its bookkeeping.
    assert (complete["type"], complete["status"], complete["reason"]) == (
        "Complete",
        "True",
        "AllJobsCompleted",
    )
    # JobSet's message word for word (upstream's e2e suite compares it); kubetrain's
    # account of the success stays in its bookkeeping.
    assert complete["message"] == "jobset completed successfully"
    assert complete["lastTransitionTime"] and status["state"] == "Complete"
    assert "completionTime" in status
    (succeeded,) = [c for c in status["kubetrain"]["conditions"] if c["type"] == "Succeeded"]
    assert succeeded["reason"] == "TrainJobSucceeded"
    assert succeeded["message"] == "TrainJob tj succeeded: every node pod completed."
    assert status["jobsStatus"] == [
        {"name": "node", "active": 0, "ready": 0, "succeeded": 1, "failed": 0, "suspended": 0}
    ]


def test_a_job_failure_is_upstreams_failedjobs_and_counts_its_job_failed() -> None:
    # OnFailure (JobSet's default): the container restarts in place, so no pod ever
    # reaches phase Failed; backoffLimit 0 ends the TrainJob at the first restart.
    cluster, reconciler, key, _ = setup(runtime=torch_runtime(backoff_limit=0))
    reconciler.reconcile(key)
    cluster.children["Pod"]["tj-node-0-0"] = node_pod("tj-node-0-0")
    cluster.children["Pod"]["tj-node-0-1"] = node_pod(
        "tj-node-0-1", restarts=1, last_exit=(137, "OOMKilled")
    )
    reconciler.reconcile(key)
    status = cluster.jobs[key]["status"]
    (failed,) = status["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "FailedJobs")
    assert "tj-node-0-1" in failed["message"] and "OOMKilled" in failed["message"]
    # The field a TrainJob user edits, not a v1 job's spec.runPolicy.backoffLimit.
    assert "Raise the backoffLimit of its runtime's Job template" in failed["message"]
    assert "runPolicy" not in failed["message"]
    (own,) = [c for c in status["kubetrain"]["conditions"] if c["type"] == "Failed"]
    assert own["reason"] == "BackoffLimitExceeded"
    assert status["jobsStatus"] == [
        {"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 1, "suspended": 0}
    ]


def test_a_suspended_trainjob_says_so_in_upstreams_words() -> None:
    cluster, reconciler, key, _ = setup()
    cluster.jobs[key]["spec"]["suspend"] = True
    reconciler.reconcile(key)
    status = cluster.jobs[key]["status"]
    (suspended,) = status["conditions"]
    assert (suspended["type"], suspended["reason"]) == ("Suspended", "Suspended")
    assert "until spec.suspend is false" in suspended["message"]
    assert status["jobsStatus"] == [
        {"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 1}
    ]


def test_a_trainjob_past_its_deadline_names_its_own_field() -> None:
    cluster, reconciler, key, clock = setup()
    cluster.jobs[key]["spec"]["activeDeadlineSeconds"] = 30
    reconciler.reconcile(key)
    for name in ("tj-node-0-0", "tj-node-0-1"):
        cluster.children["Pod"][name] = node_pod(name)
    reconciler.reconcile(key)
    clock.now = NOW + timedelta(seconds=120)
    reconciler.reconcile(key)
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "DeadlineExceeded")
    assert "longer than spec.activeDeadlineSeconds (30s)" in failed["message"]


def test_every_container_gets_its_pods_completion_index() -> None:
    runtime = torch_runtime()
    template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    pod_spec = template["spec"]["template"]["spec"]
    pod_spec["initContainers"] = [{"name": "fetch", "image": "t:1"}]
    pod_spec["containers"].append(
        {"name": "sidecar", "image": "t:1", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "x"}]}
    )
    cluster, reconciler, key, _ = setup(runtime=runtime)
    reconciler.reconcile(key)
    from_annotation = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {
            "fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
            }
        },
    }
    for index in (0, 1):
        made = cluster.children["Pod"][f"tj-node-0-{index}"]
        assert made["metadata"]["annotations"][K.JOB_COMPLETION_INDEX] == str(index)
        spec = made["spec"]
        (fetch,) = spec["initContainers"]
        node, sidecar = spec["containers"]
        assert from_annotation in fetch["env"] and from_annotation in node["env"]
        # A container that sets the variable keeps its own value.
        assert [e for e in sidecar["env"] if e["name"] == "JOB_COMPLETION_INDEX"] == [
            {"name": "JOB_COMPLETION_INDEX", "value": "x"}
        ]


def test_the_bookkeeping_round_trips() -> None:
    cluster, reconciler, key, _ = setup()
    reconciler.reconcile(key)
    wire = cluster.jobs[key]["status"]
    internal = CODEC.read(wire)
    assert [c.type.value for c in internal.conditions or []] == ["Created"]
    assert CODEC.normalized(wire) == wire


def test_a_trainjob_waits_briefly_for_its_runtime_then_fails() -> None:
    cluster, reconciler, key, clock = setup(with_runtime=False, created_ago=1)
    result = reconciler.reconcile(key)
    assert cluster.children["Pod"] == {}
    status = cluster.jobs[key]["status"]
    assert "conditions" not in status and status["state"] == "Created"
    assert result.requeue_after is not None and result.requeue_after <= 5
    clock.now = NOW + timedelta(seconds=60)
    reconciler.reconcile(key)
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "RuntimeNotFound")
    assert "ClusterTrainingRuntime torch does not exist" in failed["message"]


def test_fails_a_trainjob_its_runtime_makes_invalid_naming_the_runtime_plainly() -> None:
    """issue: upstream's examples/yaml/05-multi-step.yaml failed InvalidSpec quoting
    ``spec.runtimeRef: {"apiGroup": ... (98 characters) is invalid``; the message names
    the runtime instead."""
    path = UPSTREAM_TRAINER / "examples" / "yaml" / "05-multi-step.yaml"
    runtime, job = (d for d in parse_yaml_all(path.read_text()) if d)
    runtime["metadata"]["namespace"] = "ns"
    job["metadata"].update(namespace="ns", uid="tj-uid", creationTimestamp=stamp(5))
    cluster = MemoryCluster()
    cluster.runtimes[("TrainingRuntime", "ns", "torch-with-dataset-init")] = runtime
    key = cluster.add_job(job)
    Reconciler(cluster, cluster, PLUGINS, clock=Clock()).reconcile(key)
    assert cluster.children["Pod"] == {}
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "InvalidSpec")
    assert failed["message"] == (
        "the job is invalid and will not be run: runtime torch-with-dataset-init "
        "(TrainingRuntime) is invalid: must have volumeMount with name - initializer in "
        "container dataset-initializer of the dataset-initializer job"
    )


def test_a_runtime_is_marked_in_use_while_a_trainjob_names_it() -> None:
    cluster, reconciler, key, _ = setup()
    # Left by kubetrain 0.1: the operator drops it (it kept runtimes Terminating).
    cluster.runtimes[RUNTIME_KEY]["metadata"]["finalizers"] = [K.RUNTIME_IN_USE_FINALIZER]
    reconciler.reconcile(RUNTIME_KEY)
    meta = cluster.runtimes[RUNTIME_KEY]["metadata"]
    assert meta["annotations"] == {K.RUNTIME_IN_USE_ANNOTATION: "true"}
    assert meta["finalizers"] == []
    calls = len(cluster.calls)
    reconciler.reconcile(RUNTIME_KEY)
    assert len(cluster.calls) == calls  # nothing to change: nothing written
    del cluster.jobs[key]
    reconciler.reconcile(RUNTIME_KEY)
    assert meta["annotations"] == {}


def test_a_runtime_being_deleted_is_not_marked() -> None:
    cluster, reconciler, _, _ = setup()
    cluster.runtimes[RUNTIME_KEY]["metadata"]["deletionTimestamp"] = stamp()
    reconciler.reconcile(RUNTIME_KEY)
    assert K.RUNTIME_IN_USE_ANNOTATION not in (
        cluster.runtimes[RUNTIME_KEY]["metadata"].get("annotations") or {}
    )


def test_the_in_use_patch_is_guarded_and_minimal() -> None:
    runtime: dict[str, Any] = {"metadata": {"resourceVersion": "7", "annotations": {"team": "a"}}}
    assert in_use_patch(runtime, False) == []
    assert in_use_patch(runtime, True) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"team": "a", K.RUNTIME_IN_USE_ANNOTATION: "true"},
        },
    ]
    runtime["metadata"]["annotations"][K.RUNTIME_IN_USE_ANNOTATION] = "true"
    runtime["metadata"]["finalizers"] = ["other", K.RUNTIME_IN_USE_FINALIZER]
    assert in_use_patch(runtime, False)[1:] == [
        {"op": "remove", "path": "/metadata/annotations/kubetrain.dev~1runtime-in-use"},
        {"op": "replace", "path": "/metadata/finalizers", "value": ["other"]},
    ]


def test_jobset_level_labels_and_annotations_reach_no_pod_or_service() -> None:
    # Upstream puts the runtime template's metadata, and a patch's, on the JobSet only;
    # a patch's pod-level labels do reach the pods.
    runtime = torch_runtime()
    runtime["spec"]["template"]["metadata"] = {"labels": {"jobset-level": "runtime"}}
    cluster, reconciler, key, _ = setup(runtime=runtime)
    cluster.jobs[key]["spec"]["runtimePatches"] = [
        {
            "manager": "example.com/team",
            "trainingRuntimeSpec": {
                "template": {
                    "metadata": {
                        "labels": {"jobset-level": "patch"},
                        "annotations": {"jobset-note": "patch"},
                    },
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {"metadata": {"labels": {"pod-level": "yes"}}}
                                    }
                                },
                            }
                        ]
                    },
                }
            },
        }
    ]
    reconciler.reconcile(key)
    service = cluster.children["Service"]["tj"]
    pods = [cluster.children["Pod"][f"tj-node-0-{i}"] for i in (0, 1)]
    for child in (service, *pods):
        meta = child["metadata"]
        assert "jobset-level" not in (meta.get("labels") or {}), meta
        assert "jobset-note" not in (meta.get("annotations") or {}), meta
    assert all(p["metadata"]["labels"]["pod-level"] == "yes" for p in pods)


def _images(cluster: Any) -> set[str]:
    return {c["image"] for p in cluster.children["Pod"].values() for c in p["spec"]["containers"]}


def test_the_runtime_is_pinned_at_the_first_reconcile_and_used_ever_after() -> None:
    cluster, reconciler, key, _ = setup()
    cluster.jobs[key]["spec"]["suspend"] = True  # a suspended job pins it too (Kueue)
    reconciler.reconcile(key)
    assert cluster.children["Pod"] == {}
    snapshot = cluster.children["ConfigMap"]["tj-runtime-snapshot"]
    (owner,) = snapshot["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainJob", "tj-uid", True)
    pinned = parse_yaml(snapshot["data"]["runtime"])
    assert (pinned["kind"], pinned["metadata"]["name"]) == ("ClusterTrainingRuntime", "torch")
    assert pinned["spec"] == RUNTIME["spec"]
    original = _runtime_image(RUNTIME)
    # The runtime changes (and later goes) while the job is suspended; resumed, the job
    # is built from the runtime it started with.
    changed = copy.deepcopy(RUNTIME)
    _set_runtime_image(changed, "example.com/trainer:new")
    cluster.runtimes[RUNTIME_KEY] = changed
    cluster.jobs[key]["spec"]["suspend"] = False
    reconciler.reconcile(key)
    assert _images(cluster) == {original}
    assert cluster.children["ConfigMap"]["tj-runtime-snapshot"] == snapshot
    del cluster.runtimes[RUNTIME_KEY]
    cluster.children["Pod"].clear()
    reconciler.reconcile(key)
    assert _images(cluster) == {original}
    assert "conditions" not in cluster.jobs[key]["status"]


def test_a_snapshot_of_another_runtime_fails_the_job_naming_it() -> None:
    cluster, reconciler, key, _ = setup()
    other = copy.deepcopy(RUNTIME)
    other["metadata"]["name"] = "jax"
    cluster.children["ConfigMap"]["tj-runtime-snapshot"] = {
        "kind": "ConfigMap",
        "metadata": {"name": "tj-runtime-snapshot", "namespace": "ns"},
        "data": {"runtime": yaml.safe_dump(other)},
    }
    reconciler.reconcile(key)
    assert cluster.children["Pod"] == {}
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert failed["type"] == "Failed"
    assert "ConfigMap tj-runtime-snapshot data.runtime" in failed["message"]
    assert "it pins ClusterTrainingRuntime jax" in failed["message"]
    assert "expected ClusterTrainingRuntime torch" in failed["message"]


def test_a_snapshot_without_its_runtime_key_fails_the_job_naming_the_key() -> None:
    cluster, reconciler, key, _ = setup()
    cluster.children["ConfigMap"]["tj-runtime-snapshot"] = {
        "kind": "ConfigMap",
        "metadata": {"name": "tj-runtime-snapshot", "namespace": "ns"},
        "data": {"other": "x"},
    }
    reconciler.reconcile(key)
    (failed,) = cluster.jobs[key]["status"]["conditions"]
    assert "ConfigMap tj-runtime-snapshot data.runtime: is required" in failed["message"]


def _runtime_image(runtime: dict[str, Any]) -> str:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return str(job["template"]["spec"]["template"]["spec"]["containers"][0]["image"])


def _set_runtime_image(runtime: dict[str, Any], image: str) -> None:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    job["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = image


def test_runtime_patch_times_are_stamped_once_before_the_reconcile() -> None:
    """The operator stamps runtimePatches' times as Trainer's webhook does (one JSON patch
    of the TrainJob, conditional on its resourceVersion), then reconciles the stamped
    version: its status write is not refused as stale. Seen again, nothing is written."""
    cluster, reconciler, key, clock = setup()
    job = cluster.jobs[key]
    job["metadata"]["resourceVersion"] = "3"
    job["spec"]["runtimePatches"] = [
        {"manager": "kueue.x-k8s.io/manager"},
        {"manager": "example.com/team", "time": "2026-01-02T03:04:05Z"},
    ]
    reconciler.reconcile(key)
    job = cluster.jobs[key]
    assert job["spec"]["runtimePatches"] == [
        {"manager": "kueue.x-k8s.io/manager", "time": format_time(NOW)},
        {"manager": "example.com/team", "time": "2026-01-02T03:04:05Z"},
    ]
    assert cluster.calls.index(("patch-job", "tj")) < cluster.calls.index(("status", "tj"))
    assert job["status"]["state"] == "Created"
    clock.now = NOW + timedelta(seconds=30)
    reconciler.reconcile(key)
    assert cluster.calls.count(("patch-job", "tj")) == 1
    assert job["spec"]["runtimePatches"][0]["time"] == format_time(NOW)


def test_status_restarts_are_the_restarts_the_events_number() -> None:
    """issue: "status.restarts stays 0 while kubetrain's own Events say 'restarts used:
    6 of 6'". In-place restarts count, as against backoffLimit: the status says what the
    last restart Event says."""
    cluster, reconciler, key, _ = setup()
    reconciler.reconcile(key)
    cluster.children["Pod"]["tj-node-0-0"] = node_pod("tj-node-0-0")
    for restarts in (1, 2, 3):
        cluster.children["Pod"]["tj-node-0-1"] = node_pod(
            "tj-node-0-1", restarts=restarts, last_exit=(1, "Error")
        )
        reconciler.reconcile(key)
        status = cluster.jobs[key]["status"]
        assert status["restarts"] == restarts
        numbered = [e.message for e in cluster.events if "restarts used" in e.message]
        assert f"restarts used: {restarts} of 6" in numbered[-1]
