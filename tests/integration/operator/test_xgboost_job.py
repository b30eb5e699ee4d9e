"""XGBoostJob on the local control plane (kwok's fake pods): every v1 example upstream ships
(``examples/xgboost``, unchanged) from creation to Succeeded with upstream's environment in
its pods, the Master's failure failing the job, and upstream's v1 SDK (``kubeflow-training``
``TrainingClient(job_kind="XGBoostJob")``) creating, reading, waiting on and deleting one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubetrain.api import XGBoostJob, apply_defaults, load_job
from kubetrain.api import keys as K
from kubetrain.frameworks import ClusterAddressing, xgboost
from kubetrain.manifest import parse_yaml
from tests.integration.kube import wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of
from tests.integration.sdk import run_sdk

REPO_ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0/xgboost"
EXAMPLES = sorted(p.relative_to(UPSTREAM).as_posix() for p in UPSTREAM.rglob("*.yaml"))
#: The claim upstream's ``*_local.yaml`` examples mount (a PV its README has you create).
LOCAL_CLAIM = "xgboostlocal"


def _example(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = parse_yaml((UPSTREAM / name).read_text(encoding="utf-8"))
    return doc


@pytest.fixture
def local_claim(core_v1: client.CoreV1Api, namespace: str) -> Iterator[None]:
    """A bound claim ``xgboostlocal`` (a hostPath volume, as upstream's README sets up)."""
    volume = f"{namespace}-{LOCAL_CLAIM}"
    size = {"storage": "1Gi"}
    core_v1.create_persistent_volume(
        client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=volume),
            spec=client.V1PersistentVolumeSpec(
                capacity=size,
                access_modes=["ReadWriteMany"],
                host_path=client.V1HostPathVolumeSource(path="/tmp/xgboost_model"),
                storage_class_name="",
                claim_ref=client.V1ObjectReference(namespace=namespace, name=LOCAL_CLAIM),
            ),
        )
    )
    core_v1.create_namespaced_persistent_volume_claim(
        namespace,
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name=LOCAL_CLAIM),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteMany"],
                resources=client.V1VolumeResourceRequirements(requests=size),
                storage_class_name="",
                volume_name=volume,
            ),
        ),
    )
    wait_for(
        lambda: core_v1.read_namespaced_persistent_volume_claim(LOCAL_CLAIM, namespace).status,
        lambda status: status is not None and status.phase == "Bound",
        what=f"claim {LOCAL_CLAIM} to be Bound",
    )
    try:
        yield
    finally:
        core_v1.delete_persistent_volume(volume)


def _expected_env(doc: dict[str, Any], namespace: str, rtype: str, index: int) -> dict[str, str]:
    job = apply_defaults(load_job({**doc, "metadata": {**doc["metadata"], "namespace": namespace}}))
    assert isinstance(job, XGBoostJob)
    env = xgboost.replica_env(job, rtype, index, ClusterAddressing())
    return {var["name"]: var["value"] for var in env}


@pytest.mark.parametrize("example", EXAMPLES)
def test_upstream_example_runs_to_succeeded(
    operator: RunningOperator,
    jobs: Jobs,
    namespace: str,
    request: pytest.FixtureRequest,
    example: str,
) -> None:
    doc = _example(example)
    if example.endswith("_local.yaml"):
        request.getfixturevalue("local_claim")
    name = doc["metadata"]["name"]
    jobs.create(doc)
    replicas = [("Master", 0), ("Worker", 0), ("Worker", 1)]
    pods = jobs.wait_running(name, {f"{name}-{t.lower()}-{i}" for t, i in replicas})
    for rtype, index in replicas:
        pod = pods[f"{name}-{rtype.lower()}-{index}"]
        env = env_of(pod, "xgboost")
        expected = _expected_env(doc, namespace, rtype, index)
        assert {k: env.get(k) for k in expected} == expected
        role = pod["metadata"]["labels"].get(K.JOB_ROLE)
        assert role == ("master" if rtype == "Master" else None)
    # Upstream's values, written out once: the rank after the Master's, the Service names.
    worker = env_of(pods[f"{name}-worker-1"], "xgboost")
    assert (worker["RANK"], worker["WORLD_SIZE"], worker["MASTER_PORT"]) == ("2", "3", "9991")
    assert worker["MASTER_ADDR"] == f"{name}-master-0"
    assert worker["WORKER_ADDRS"] == f"{name}-worker-0,{name}-worker-1"
    jobs.wait_condition("XGBoostJob", name, "Running")
    jobs.exit(f"{name}-master-0", 0)
    done = jobs.wait_condition("XGBoostJob", name, "Succeeded")
    assert done["status"]["replicaStatuses"]["Master"]["succeeded"] == 1


def test_a_failed_master_fails_the_job(operator: RunningOperator, jobs: Jobs) -> None:
    doc = _example("smoke-dist/xgboostjob_v1_rabit_test.yaml")
    name = doc["metadata"]["name"]
    jobs.create(doc)
    jobs.wait_running(name, {f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"})
    jobs.exit(f"{name}-master-0", 1)
    jobs.wait_condition("XGBoostJob", name, "Failed")
    assert jobs.state("XGBoostJob", name) == "Failed"


def test_upstream_sdk_creates_waits_reads_and_deletes(
    operator: RunningOperator, jobs: Jobs, kubeconfig: Path, namespace: str
) -> None:
    base = ["--kubeconfig", str(kubeconfig), "--namespace", namespace, "--job-kind", "XGBoostJob"]

    def sdk(call: str, *args: str) -> Any:
        return run_sdk("training_v1", *base, call, *args)

    image = "docker.io/kubeflow/xgboost-dist-iris:latest"
    assert sdk("create-xgboost-job", "--name", "iris", "--image", image) == {"created": "iris"}
    jobs.wait_running("iris", {"iris-master-0", "iris-worker-0"})
    jobs.exit("iris-master-0", 0)
    verdict = sdk("wait-for-job-conditions", "--name", "iris")
    assert verdict["created"] and verdict["succeeded"]
    assert not (verdict["failed"] or verdict["restarting"])
    read = sdk("get-job", "--name", "iris")
    assert read["kind"] == "XGBoostJob" and read["name"] == "iris"
    assert read["replica_types"] == ["Master", "Worker"]
    assert "Succeeded" in read["conditions"]
    assert sdk("get-job-pod-names", "--name", "iris", "--is-master") == ["iris-master-0"]
    assert sdk("delete-job", "--name", "iris") == {"deleted": "iris"}
    jobs.wait("XGBoostJob", "iris", lambda job: job is None, what="XGBoostJob iris deleted")
