"""TrainJobs (Kubeflow Trainer v2) on the local control plane, driven by the unmodified
Kubeflow SDK (``kubeflow`` 0.5.0, in its own virtualenv) as a data scientist runs it: a
bare ``TrainerClient()`` with a ServiceAccount token kubeconfig bound only to the roles
the ``TrainerUserAccess`` construct gives SDK users. Pods are kwok's: they run at once
and end when the test says so."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import cdk8s
import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from cluster.local import CommandResult, LocalCluster
from kubetrain.api import keys as K
from kubetrain.constructs import App, Chart
from kubetrain.constructs.objects import manifests
from kubetrain.constructs.operator import TrainingOperator, TrainingOperatorProps
from kubetrain.constructs.trainer_access import TrainerUserAccess
from kubetrain.constructs.types import Image
from kubetrain.controller.conditions import format_time
from kubetrain.manifest import parse_yaml
from tests.builders.jobs import GPU_TOLERATION
from tests.conftest import REPO_ROOT
from tests.integration.kube import apply, remove_applied, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of, release_runtimes, train_job
from tests.integration.operator.running import SharedOperator
from tests.integration.operator.sdk_users import Sdk, scientist_env

UPSTREAM = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes"
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
RUNTIMES = ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")


def _upstream(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = parse_yaml((UPSTREAM / name).read_text())
    return obj


def _with_gpu_toleration(runtime: dict[str, Any]) -> dict[str, Any]:
    """What a platform team adds to upstream's runtime for tainted GPU nodes."""
    out = copy.deepcopy(runtime)
    for rjob in out["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod["tolerations"] = [GPU_TOLERATION]
    return out


@pytest.fixture(scope="module")
def sdk_access(dyn: DynamicClient, installed_crds: list[dict[str, Any]]) -> Iterator[None]:
    """The SDK users' roles and public ConfigMap (the construct, as a stack renders it);
    removed after the module."""
    app = App()
    chart = Chart(app, "sdk-access")
    TrainerUserAccess(chart, "Access")
    objects = chart.to_json()
    for obj in objects:
        apply(dyn, obj)
    yield
    remove_applied(dyn, objects)


def _namespaced(runtime: dict[str, Any], namespace: str) -> dict[str, Any]:
    """An upstream ClusterTrainingRuntime as a TrainingRuntime of the test's namespace (the
    same spec; upstream's names stay free for the cluster-scoped tests)."""
    out = copy.deepcopy(runtime)
    out["kind"] = "TrainingRuntime"
    out["metadata"]["namespace"] = namespace
    return out


@pytest.fixture
def runtimes(
    operator: RunningOperator, jobs: Jobs, dyn: DynamicClient, namespace: str
) -> Iterator[None]:
    """The runtimes the SDK tests train on, in the test's namespace: upstream's
    torch-distributed (tolerating the GPU taint) and a strict variant whose trainer may
    not restart. Torn down while the operator still runs: its TrainJobs go first, then
    the runtimes lose the in-use annotation."""
    torch = _namespaced(_with_gpu_toleration(_upstream("torch_distributed.yaml")), namespace)
    strict = copy.deepcopy(torch)
    strict["metadata"]["name"] = "torch-strict"
    strict["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    for runtime in (torch, strict):
        apply(dyn, runtime)
    yield
    release_runtimes(jobs)


@pytest.fixture
def user_env(
    sdk_access: None, runtimes: None, kubeconfig: Path, namespace: str, tmp_path: Path
) -> dict[str, str]:
    return scientist_env(kubeconfig, namespace, tmp_path)


@pytest.fixture
def sdk(user_env: dict[str, str]) -> Sdk:
    return Sdk(user_env)


def _pods(jobs: Jobs, trainjob: str) -> dict[str, dict[str, Any]]:
    found = jobs.core.list_namespaced_pod(
        jobs.namespace, label_selector=f"{K.JOBSET_NAME_LABEL}={trainjob}"
    )
    return jobs._by_name(found)


def _trainjob(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    group, version, plural = TRAINJOBS
    obj = custom.get_namespaced_custom_object(group, version, namespace, plural, name)
    assert isinstance(obj, dict)
    return obj


def _env(pod: dict[str, Any], container: str = "node") -> dict[str, str]:
    return env_of(pod, container)


def _finish(jobs: Jobs, trainjob: str, code: int = 0) -> None:
    for name in sorted(_pods(jobs, trainjob)):
        jobs.exit(name, code)


@pytest.mark.parametrize(
    ("call", "nodes", "gpus"), [(1, 1, "4"), (2, 4, "2"), (3, 2, None)], ids=["gpu", "nodes", "rt"]
)
def test_the_sdk_trains_on_kubetrain(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk, call: int, nodes: int, gpus: str | None
) -> None:
    runtimes = {r["name"]: r for r in sdk("list-runtimes")}
    assert runtimes["torch-distributed"]["framework"] == "torch"
    name = sdk("train", "--call", str(call))["name"]
    running = sdk("wait", "--name", name, "--status", "Running")
    assert "job" in running, running
    job = running["job"]
    assert job["status"] == "Running" and job["num_nodes"] == nodes
    assert [s["name"] for s in job["steps"]] == [f"node-{i}" for i in range(nodes)]
    assert {s["status"] for s in job["steps"]} == {"Running"}
    if gpus is not None:
        assert {(s["device"], s["device_count"]) for s in job["steps"]} == {("gpu", gpus)}
    pods = _pods(jobs, name)
    assert len(pods) == nodes
    for index in range(nodes):
        env = _env(pods[f"{name}-node-0-{index}"])
        assert env["PET_NNODES"] == str(nodes) and env["PET_NODE_RANK"] == str(index)
        assert env["PET_MASTER_ADDR"] == f"{name}-node-0-0.{name}"
        assert env["PET_MASTER_PORT"] == "29500"
        assert env["PET_NPROC_PER_NODE"] == ("auto" if gpus else "1")
    _finish(jobs, name)
    done = sdk("wait", "--name", name, "--status", "Complete")
    assert done["job"]["status"] == "Complete", done
    assert {s["status"] for s in done["job"]["steps"]} == {"Succeeded"}
    listed = {j["name"]: j["status"] for j in sdk("list-jobs")}
    assert listed[name] == "Complete"


def test_a_failed_trainjob_says_why_to_the_sdk_and_kubectl(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk
) -> None:
    name = sdk("train-on", "--runtime", "torch-strict", "--num-nodes", "2")["name"]
    assert "job" in sdk("wait", "--name", name, "--status", "Running")
    jobs.exit(f"{name}-node-0-1", 137, "OOMKilled")
    failed = sdk("wait", "--name", name, "--status", "Complete")
    assert failed == {"error": "RuntimeError", "message": f"TrainJob {name} is Failed"}
    status = _trainjob(jobs.custom, jobs.namespace, name)["status"]
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"]) == ("Failed", "True")
    # Upstream's reason (JobSet's FailedJobs); the message has kubetrain's cause and the
    # field to raise, the runtime's Job template backoffLimit (a TrainJob has no runPolicy).
    assert condition["reason"] == "FailedJobs"
    assert f"{name}-node-0-1" in condition["message"] and "OOMKilled" in condition["message"]
    assert "backoffLimit of its runtime's Job template" in condition["message"]
    assert [j["name"] for j in status["jobsStatus"] if j["failed"] == 1] == ["node"]
    assert status["state"] == "Failed"
    events = sdk("events", "--name", name)
    reasons = {e["reason"] for e in events}
    # OnFailure: the container restarted in place, which the strict runtime's backoffLimit
    # 0 does not allow: that restart is the failure, worded once (BackoffLimitExceeded,
    # naming OOMKilled), not also a restart Event saying "restarts used: 1 of 0".
    assert {"BackoffLimitExceeded", "TrainJobCreated"} <= reasons
    assert "OOMKilled" not in reasons
    # What was created, as the SDK shows it: the Created Event names the node pods.
    (created,) = [e for e in events if e["reason"] == "TrainJobCreated"]
    assert f"2 pods: {name}-node-0-0, {name}-node-0-1" in created["message"]
    (exceeded,) = [e for e in events if e["reason"] == "BackoffLimitExceeded"]
    assert "OOMKilled" in exceeded["message"]
    assert not any("restarts used" in e["message"] for e in events)
    assert all(e["kind"] == "TrainJob" and e["name"] == name for e in events)


def test_no_condition_while_running_and_suspend_leaves_none_behind(
    operator: RunningOperator, jobs: Jobs, sdk: Sdk
) -> None:
    """kubeflow/sdk#803: any condition freezes the SDK at Created."""
    name = sdk("train-on", "--runtime", "torch-distributed", "--num-nodes", "1")["name"]
    assert "job" in sdk("wait", "--name", name, "--status", "Running")
    assert "conditions" not in _trainjob(jobs.custom, jobs.namespace, name)["status"]
    patch = {"spec": {"suspend": True}}
    jobs.custom.patch_namespaced_custom_object(
        *TRAINJOBS[:2], jobs.namespace, TRAINJOBS[2], name, patch
    )
    suspended = wait_for(
        lambda: _trainjob(jobs.custom, jobs.namespace, name)["status"],
        lambda s: s.get("state") == "Suspended",
        what="the TrainJob suspended",
    )
    assert [c["type"] for c in suspended["conditions"]] == ["Suspended"]
    wait_for(lambda: _pods(jobs, name), lambda p: not p, what="its pods deleted")
    patch = {"spec": {"suspend": False}}
    jobs.custom.patch_namespaced_custom_object(
        *TRAINJOBS[:2], jobs.namespace, TRAINJOBS[2], name, patch
    )
    running = sdk("wait", "--name", name, "--status", "Running")
    assert running["job"]["status"] == "Running"
    assert "conditions" not in _trainjob(jobs.custom, jobs.namespace, name)["status"]


def test_delete_job_collects_the_children(operator: RunningOperator, jobs: Jobs, sdk: Sdk) -> None:
    name = sdk("train-on", "--runtime", "torch-distributed", "--num-nodes", "2")["name"]
    assert "job" in sdk("wait", "--name", name, "--status", "Running")
    assert len(_pods(jobs, name)) == 2
    sdk("delete", "--name", name)
    wait_for(lambda: _pods(jobs, name), lambda p: not p, what="the pods garbage-collected")
    assert name not in {j["name"] for j in sdk("list-jobs")}


def _create_trainjob(jobs: Jobs, name: str, runtime: str, nodes: int) -> None:
    group, version, plural = TRAINJOBS
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": nodes},
        },
    }
    jobs.custom.create_namespaced_custom_object(group, version, jobs.namespace, plural, body)


def _state(jobs: Jobs, name: str) -> str | None:
    state = _trainjob(jobs.custom, jobs.namespace, name).get("status", {}).get("state")
    return str(state) if state is not None else None


@pytest.mark.parametrize(
    ("manifest", "nodes"),
    [
        ("torch_distributed.yaml", 2),
        ("jax_distributed.yaml", 2),
        ("xgboost_distributed.yaml", 2),
        ("deepspeed_distributed.yaml", 3),
    ],
    ids=["torch", "jax", "xgboost", "deepspeed-mpi"],
)
def test_upstream_runtimes_run_unchanged(
    operator: RunningOperator,
    jobs: Jobs,
    dyn: DynamicClient,
    namespace: str,
    manifest: str,
    nodes: int,
) -> None:
    """Upstream v2.3.0's own runtimes, their spec as it is: a TrainJob of each gets its
    framework's environment, starts in the runtime's order and completes."""
    runtime = _namespaced(_upstream(manifest), namespace)
    apply(dyn, runtime)
    name = f"up-{manifest.split('_')[0]}"
    _create_trainjob(jobs, name, runtime["metadata"]["name"], nodes)
    host = f"{name}-node-0-0.{name}"
    if manifest.startswith("deepspeed"):
        # runLauncherAsNode: the launcher is a node; it starts once the others are Ready.
        pods = wait_for(
            lambda: _pods(jobs, name), lambda p: len(p) == nodes, what="launcher and nodes"
        )
        launcher = pods[f"{name}-launcher-0-0"]
        env = _env(launcher)
        assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert env["OMPI_MCA_orte_set_default_slots"] == "1"
        mounts = {m["mountPath"] for c in launcher["spec"]["containers"] for m in c["volumeMounts"]}
        assert {"/etc/mpi", "/home/mpiuser/.ssh"} <= mounts
        cm = jobs.core.read_namespaced_config_map(f"{name}-mpi-hostfile", jobs.namespace)
        domain = f"{name}.{jobs.namespace}.svc"
        assert (cm.data or {}).get("hostfile") == (
            f"{name}-launcher-0-0.{domain} slots=1\n"
            f"{name}-node-0-0.{domain} slots=1\n{name}-node-0-1.{domain} slots=1\n"
        )
        wait_for(lambda: _state(jobs, name), lambda s: s == "Running", what="Running")
        jobs.exit(f"{name}-launcher-0-0", 0)
    else:
        pods = wait_for(lambda: _pods(jobs, name), lambda p: len(p) == nodes, what="nodes")
        env = _env(pods[f"{name}-node-0-1"])
        if manifest.startswith("torch"):
            assert (env["PET_NODE_RANK"], env["PET_MASTER_ADDR"]) == ("1", host)
        elif manifest.startswith("jax"):
            assert env["JAX_NUM_PROCESSES"] == "2" and env["JAX_PROCESS_ID"] == "1"
            assert env["JAX_COORDINATOR_ADDRESS"] == f"{host}:29500"
        else:
            assert (env["DMLC_TRACKER_URI"], env["DMLC_TRACKER_PORT"]) == (host, "29500")
            assert (env["DMLC_TASK_ID"], env["DMLC_NUM_WORKER"]) == ("1", "2")
        wait_for(lambda: _state(jobs, name), lambda s: s == "Running", what="Running")
        _finish(jobs, name)
    wait_for(lambda: _state(jobs, name), lambda s: s == "Complete", what="Complete")
    status = _trainjob(jobs.custom, jobs.namespace, name)["status"]
    assert [c["type"] for c in status["conditions"]] == ["Complete"]
    release_runtimes(jobs)


def _protection(namespace: str, name: str) -> list[dict[str, Any]]:
    """The operator construct's runtime protection and Deployment, for an operator named
    ``name`` in ``namespace`` (the policy's parameter is that Deployment)."""
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "protection", disable_resource_name_hashes=True)
    props = TrainingOperatorProps(
        image=Image("ghcr.io/kubetrain/operator:0.1.0"),
        name=name,
        namespace=namespace,
        create_namespace=False,
    )
    TrainingOperator(chart, "Operator", props)
    wanted = {
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ServiceAccount",
        "Deployment",
    }
    return [
        o
        for o in manifests(chart)
        if o["kind"] in wanted and o["metadata"]["name"] in (name, f"{name}-runtimes-in-use")
    ]


def test_a_runtime_in_use_is_not_deleted_while_the_operator_is_deployed(
    operator: RunningOperator,
    jobs: Jobs,
    dyn: DynamicClient,
    sdk: Sdk,
    namespace: str,
    local_cluster: LocalCluster,
) -> None:
    """kubeflow/sdk#797: deleting a runtime under a TrainJob would break the SDK's
    list_jobs. ``kubectl delete`` of a runtime in use is refused, naming why, while the
    operator's Deployment runs; once its TrainJob is gone, or the operator scaled to zero
    or uninstalled, the deletion goes through at once (nothing left Terminating)."""
    suffix = namespace[-6:]
    objects = _protection(namespace, f"kt-{suffix}")
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    for obj in objects:
        apply(dyn, obj)
    try:
        held = [f"held-{suffix}-{i}" for i in range(3)]
        for runtime_name in held:
            runtime = _with_gpu_toleration(_upstream("torch_distributed.yaml"))
            runtime["metadata"]["name"] = runtime_name
            apply(dyn, runtime)
        names = [sdk("train-on", "--runtime", r, "--num-nodes", "1")["name"] for r in held]
        group, version, plural = RUNTIMES

        def marked(runtime_name: str) -> bool:
            obj = jobs.custom.get_cluster_custom_object(group, version, plural, runtime_name)
            assert isinstance(obj, dict)
            return K.RUNTIME_IN_USE_ANNOTATION in (obj["metadata"].get("annotations") or {})

        for runtime_name in held:
            wait_for(partial(marked, runtime_name), bool, what=f"{runtime_name} marked in use")

        def delete(runtime_name: str, *extra: str) -> CommandResult:
            return local_cluster.kubectl(
                "delete", "clustertrainingruntime", runtime_name, *extra, check=False
            )

        def refused(runtime_name: str, expected: bool) -> None:
            # The API server's view of a policy or Deployment that just changed catches
            # up within moments: a server-side dry run goes through the same admission.
            wait_for(
                lambda: delete(runtime_name, "--dry-run=server").returncode != 0,
                lambda r: r == expected,
                what=f"deleting {runtime_name} {'refused' if expected else 'allowed'}",
            )

        # 1. Refused while in use and the operator is deployed; the SDK still reads it.
        refused(held[0], True)
        answer = delete(held[0])
        assert answer.returncode != 0
        assert f"ClusterTrainingRuntime {held[0]} is used by TrainJobs" in answer.stderr
        assert "delete them first" in answer.stderr
        kept = jobs.custom.get_cluster_custom_object(group, version, plural, held[0])
        assert isinstance(kept, dict) and "deletionTimestamp" not in kept["metadata"]
        assert names[0] in {j["name"] for j in sdk("list-jobs")}
        assert sdk("get-job", "--name", names[0])["runtime"] == held[0]
        # 2. Its TrainJob deleted, the operator unmarks it: deleted at once.
        sdk("delete", "--name", names[0])
        wait_for(lambda: marked(held[0]), lambda m: not m, what=f"{held[0]} unmarked")
        assert delete(held[0], "--wait=false").returncode == 0
        assert held[0] not in _cluster_runtime_names(jobs)
        # 3. The operator scaled to zero: nothing keeps the mark true, nothing is refused.
        ops = ["-n", namespace]
        deployed = deployment["metadata"]["name"]
        local_cluster.kubectl("scale", "deployment", deployed, "--replicas=0", *ops)
        refused(held[1], False)
        assert delete(held[1], "--wait=false").returncode == 0
        assert held[1] not in _cluster_runtime_names(jobs)
        # 4. Uninstalled (the Deployment gone): the same.
        local_cluster.kubectl("scale", "deployment", deployed, "--replicas=1", *ops)
        refused(held[2], True)
        local_cluster.kubectl("delete", "deployment", deployed, *ops)
        refused(held[2], False)
        assert delete(held[2], "--wait=false").returncode == 0
        assert held[2] not in _cluster_runtime_names(jobs)
    finally:
        for obj in objects:
            local_cluster.kubectl(
                "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found",
                *(["-n", namespace] if obj["metadata"].get("namespace") else []),
                check=False,
            )  # fmt: skip


def _cluster_runtime_names(jobs: Jobs) -> set[str]:
    group, version, plural = RUNTIMES
    found = jobs.custom.list_cluster_custom_object(group, version, plural)
    assert isinstance(found, dict)
    return {str(r["metadata"]["name"]) for r in found["items"]}


def _node_image(runtime: dict[str, Any]) -> str:
    (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return str(rjob["template"]["spec"]["template"]["spec"]["containers"][0]["image"])


def test_resumed_trainjobs_keep_the_runtimes_they_started_with(
    operator: RunningOperator,
    shared_operator: SharedOperator,
    jobs: Jobs,
    dyn: DynamicClient,
    namespace: str,
) -> None:
    """Upstream's e2e "Updating a runtime", for a TrainingRuntime and a
    ClusterTrainingRuntime at once: the runtime is pinned in ConfigMap
    ``<trainjob>-runtime-snapshot`` at the first reconcile; a suspended TrainJob resumed
    after its runtime's image changed comes back with the original image, also under an
    operator started afresh meanwhile (it reads the snapshot back from the API server; one
    restart serves both kinds); the snapshot goes with the TrainJob."""
    group, version, plural = TRAINJOBS
    suspended = {
        kind: _pinned_then_changed(jobs, dyn, namespace, kind, name)
        for kind, name in (("TrainingRuntime", "pinned"), ("ClusterTrainingRuntime", "pinned-c"))
    }
    # The shared operator stopped, and a new one started: the next tests share it.
    operator.stop()
    assert shared_operator.get() is not operator
    for kind, (name, _runtime, original) in suspended.items():
        patch = {"spec": {"suspend": False}}
        jobs.custom.patch_namespaced_custom_object(
            group, version, jobs.namespace, plural, name, patch
        )
        pods = wait_for(partial(_pods, jobs, name), lambda p: len(p) == 1, what=f"{name} back")
        images = {c["image"] for p in pods.values() for c in p["spec"]["containers"]}
        assert images == {original}, kind
        jobs.custom.delete_namespaced_custom_object(group, version, jobs.namespace, plural, name)
        wait_for(
            partial(_snapshot_gone, jobs, name),
            bool,
            what=f"{name}'s snapshot garbage-collected with its TrainJob",
        )
    release_runtimes(jobs)
    _, cluster_runtime, _ = suspended["ClusterTrainingRuntime"]
    dyn.resources.get(
        api_version="trainer.kubeflow.org/v1alpha1", kind="ClusterTrainingRuntime"
    ).delete(name=cluster_runtime["metadata"]["name"])


def _snapshot_gone(jobs: Jobs, name: str) -> bool:
    try:
        jobs.core.read_namespaced_config_map(f"{name}-runtime-snapshot", jobs.namespace)
    except client.ApiException as err:
        return bool(err.status == 404)
    return False


def _pinned_then_changed(
    jobs: Jobs, dyn: DynamicClient, namespace: str, kind: str, name: str
) -> tuple[str, dict[str, Any], str]:
    """A TrainJob ``name`` on a new runtime of ``kind``, its runtime snapshot checked, then
    suspended and its runtime's image changed: (its name, the runtime, the original
    image)."""
    runtime = _with_gpu_toleration(_upstream("torch_distributed.yaml"))
    runtime["metadata"]["name"] = f"{name}-{namespace[-6:]}"
    if kind == "TrainingRuntime":
        runtime = _namespaced(runtime, namespace)
    apply(dyn, runtime)
    original = _node_image(runtime)
    group, version, plural = TRAINJOBS
    body = train_job(name, runtime["metadata"]["name"], nodes=1)
    body["spec"]["runtimeRef"]["kind"] = kind
    jobs.custom.create_namespaced_custom_object(group, version, jobs.namespace, plural, body)
    pods = wait_for(lambda: _pods(jobs, name), lambda p: len(p) == 1, what=f"{name}'s node pod")
    assert {c["image"] for p in pods.values() for c in p["spec"]["containers"]} == {original}
    # Created in the same reconcile as the pod, by another writer thread.
    snapshot = wait_for(
        lambda: jobs.config_maps(name).get(f"{name}-runtime-snapshot"),
        lambda cm: cm is not None,
        what=f"{name}'s runtime snapshot ConfigMap",
    )
    assert snapshot is not None
    (owner,) = snapshot["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", name, True)
    pinned = parse_yaml(snapshot["data"]["runtime"])
    assert (pinned["kind"], _node_image(pinned)) == (kind, original)

    patch = {"spec": {"suspend": True}}
    jobs.custom.patch_namespaced_custom_object(group, version, jobs.namespace, plural, name, patch)
    wait_for(lambda: _pods(jobs, name), lambda p: not p, what=f"{name}'s pods deleted")
    changed = copy.deepcopy(runtime)
    (rjob,) = changed["spec"]["template"]["spec"]["replicatedJobs"]
    rjob["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/new:1"
    apply(dyn, changed)
    return name, runtime, original


def _selector_patch(manager: str, zone: str | None, time: str | None = None) -> dict[str, Any]:
    """A runtime patch as upstream's e2e writes them: the node pods' node selector."""
    patch: dict[str, Any] = {"manager": manager}
    if zone is not None:
        pod = {"spec": {"nodeSelector": {"zone": zone}}}
        node = {"name": "node", "template": {"spec": {"template": pod}}}
        patch["trainingRuntimeSpec"] = {"template": {"spec": {"replicatedJobs": [node]}}}
    if time is not None:
        patch["time"] = time
    return patch


def test_runtime_patch_times_are_stamped_as_upstreams_webhook_stamps_them(
    operator: RunningOperator, jobs: Jobs, dyn: DynamicClient, namespace: str
) -> None:
    """Upstream's e2e "Creating a TrainJob with RuntimePatches", both specs, through the
    operator: on create a given time is kept and a missing one stamped; on update (an
    Update, as the e2e makes it) the unchanged patch keeps its time, the changed one gets
    a new one, a new patch without a time is stamped and one with a time keeps it."""
    runtime = _namespaced(_with_gpu_toleration(_upstream("torch_distributed.yaml")), namespace)
    apply(dyn, runtime)
    group, version, plural = TRAINJOBS
    now = datetime.now(UTC).replace(microsecond=0)
    user_time = format_time(now - timedelta(hours=1))
    new_patch_time = format_time(now - timedelta(minutes=30))
    body = train_job("stamped", runtime["metadata"]["name"], nodes=1)
    body["spec"]["suspend"] = True
    body["spec"]["runtimePatches"] = [
        _selector_patch("test.io/unchanged", "keep"),
        _selector_patch("test.io/will-change", "old", user_time),
    ]
    jobs.custom.create_namespaced_custom_object(group, version, jobs.namespace, plural, body)

    def patches() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = _trainjob(jobs.custom, namespace, "stamped")["spec"][
            "runtimePatches"
        ]
        return found

    created = wait_for(patches, lambda ps: all(p.get("time") for p in ps), what="times stamped")
    assert created[1]["time"] == user_time
    unchanged_time = created[0]["time"]
    time.sleep(1)  # metav1.Time has second precision: the next stamp differs
    current = _trainjob(jobs.custom, namespace, "stamped")
    changed = current["spec"]["runtimePatches"]
    changed[1] = _selector_patch("test.io/will-change", "new", changed[1]["time"])
    changed += [
        _selector_patch("test.io/new-no-time", None),
        _selector_patch("test.io/new-with-time", None, new_patch_time),
    ]
    jobs.custom.replace_namespaced_custom_object(
        group, version, jobs.namespace, plural, "stamped", current
    )
    after = wait_for(
        patches,
        lambda ps: len(ps) == 4 and all(p.get("time") for p in ps) and ps[1]["time"] != user_time,
        what="the changed and new patches stamped",
    )
    assert after[0]["time"] == unchanged_time
    assert after[1]["time"] > unchanged_time
    assert after[2]["time"] >= after[1]["time"]
    assert after[3]["time"] == new_patch_time
    release_runtimes(jobs)


def test_a_never_runtime_replaces_failed_pods_as_the_job_controller_counts_them(
    operator: RunningOperator, jobs: Jobs, dyn: DynamicClient, namespace: str
) -> None:
    """``restartPolicy: Never`` in the runtime's Job template is not "no retry": the Job
    controller replaces a failed pod until more than ``backoffLimit`` have failed."""
    runtime = _namespaced(_with_gpu_toleration(_upstream("torch_distributed.yaml")), namespace)
    runtime["metadata"]["name"] = "torch-never"
    job_spec = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job_spec["backoffLimit"] = 1
    job_spec["template"]["spec"]["restartPolicy"] = "Never"
    apply(dyn, runtime)
    for name in ("recovers", "exhausts"):
        _create_trainjob(jobs, name, "torch-never", 1)
    for name in ("recovers", "exhausts"):
        pod = f"{name}-node-0-0"
        first = jobs.wait_running(name, {pod})[pod]
        assert first["spec"]["restartPolicy"] == "Never"
        jobs.exit(pod, 1)
        uid = first["metadata"]["uid"]

        def replacement_runs(pods: dict[str, dict[str, Any]], p: str = pod, u: str = uid) -> bool:
            now = pods.get(p)
            if now is None:
                return False
            return bool(now["metadata"]["uid"] != u and now["status"]["phase"] == "Running")

        jobs.wait_pods(name, replacement_runs, what=f"{pod} replaced after its first failure")
        status = _trainjob(jobs.custom, jobs.namespace, name)["status"]
        assert status.get("conditions") is None and status["restarts"] == 1
    # The replacement succeeds: the job completes.
    jobs.exit("recovers-node-0-0", 0)
    wait_for(lambda: _state(jobs, "recovers"), lambda s: s == "Complete", what="Complete")
    # A second failure is more than backoffLimit 1: the job fails, as its Job would.
    jobs.exit("exhausts-node-0-0", 1)
    wait_for(lambda: _state(jobs, "exhausts"), lambda s: s == "Failed", what="Failed")
    failed = _trainjob(jobs.custom, jobs.namespace, "exhausts")
    (condition,) = failed["status"]["conditions"]
    assert condition["reason"] == "FailedJobs"
    assert [j["name"] for j in failed["status"]["jobsStatus"] if j["failed"] == 1] == ["node"]
