"""Behaviour preserved by ``kubetrain convert``: for each pair of versions, the job converted
from the older version runs on the local control plane to the same children as the same
job written natively in the served version (pod names, containers, env with TF_CONFIG and
the torchrun variables, Services, the MPI hostfile), and both reach Succeeded. A v1 job
and the TrainJob ``--to trainjob`` makes of it (a PyTorchJob; upstream's JAXJob and
XGBoostJob examples) give each node the same place in the job, and both finish.

The pairs are tests/data/convert/<name>.yaml (the older version) and
<name>.native.yaml (written by hand in the served version). The two jobs run one after
the other under distinct names, which are then read as one, so the children compare
as they are, not as the converter or the test would build them.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kubetrain.api import convert, load_job
from kubetrain.api import keys as K
from kubetrain.manifest import parse_yaml, parse_yaml_all
from tests.builders.jobs import GPU_TOLERATION
from tests.conftest import REPO_ROOT
from tests.integration.kube import apply, condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, env_of, pytorch_job, release_runtimes

DATA = REPO_ROOT / "tests" / "data" / "convert"
PAIRS = sorted(p for p in DATA.glob("*.yaml") if not p.name.endswith(".native.yaml"))
#: The pods whose exit decides the outcome, by kind (every other pod exits after them).
DECIDERS = {"PyTorchJob": "master", "TFJob": "chief", "MPIJob": "launcher"}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in parse_yaml_all(path.read_text()) if d]


def _runnable(job: dict[str, Any], name: str) -> dict[str, Any]:
    """``job`` named ``name``, its pods tolerating the fake GPU nodes' taint and without
    node affinity (v1alpha1's ``launcherOnMaster`` asks for a control-plane node, which the
    local cluster does not have); the same change on both jobs of a pair."""
    job = copy.deepcopy(job)
    job["metadata"] = {"name": name}
    specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    for rspec in specs.values():
        pod = rspec["template"].setdefault("spec", {})
        pod.pop("affinity", None)
        tolerations = pod.setdefault("tolerations", [])
        if GPU_TOLERATION not in tolerations:
            tolerations.append(GPU_TOLERATION)
    return job


def _read_as_one(value: Any, name: str) -> Any:
    """``value`` with the job's name read as ``JOB`` and the suffixes the API server
    generates (the SSH Secret's, the launcher Job's pod's) as fixed words, so that two
    jobs' children compare."""
    text = json.dumps(value, sort_keys=True).replace(name, "JOB")
    text = re.sub(r"JOB-ssh-[a-z0-9]{5}", "JOB-ssh-SECRET", text)
    return json.loads(re.sub(r"JOB-launcher-[a-z0-9]{5}", "JOB-launcher-POD", text))


def _children(jobs: Jobs, name: str) -> dict[str, Any]:
    """What the operator made for a job: each pod's containers and host names, Services,
    ConfigMaps (the hostfile)."""
    pods = {}
    for pod_name, pod in jobs.pods(name).items():
        spec = pod["spec"]
        containers = [
            {key: c.get(key) for key in ("name", "image", "command", "args", "env", "resources")}
            for c in spec.get("containers", [])
        ]
        pods[pod_name] = {
            "containers": containers,
            "hostname": spec.get("hostname"),
            "subdomain": spec.get("subdomain"),
            "role": pod["metadata"]["labels"].get(K.JOB_ROLE),
        }
    services = sorted(jobs.services(name))
    config_maps = {n: c.get("data") for n, c in jobs.config_maps(name).items()}
    children: dict[str, Any] = _read_as_one(
        {"pods": pods, "services": services, "config_maps": config_maps}, name
    )
    return children


def _run_to_success(jobs: Jobs, kind: str, name: str, expected_pods: int) -> dict[str, Any]:
    """The job's children once every pod runs; then the deciding pod (and, but for an
    MPIJob's workers, which serve sshd, every other) exits 0 and the job must succeed."""
    pods = jobs.wait_pods(
        name, lambda found: len(found) == expected_pods, what=f"{expected_pods} pods of {name}"
    )
    running = jobs.wait_running(name, set(pods))
    children = _children(jobs, name)
    decider = DECIDERS[kind]
    ordered = sorted(running, key=lambda p: (decider not in p, p))
    jobs.exit(ordered[0], 0)
    for pod in ordered[1:] if kind != "MPIJob" else []:
        try:
            jobs.exit(pod, 0)
        except ApiException as error:  # the operator's cleanup stopped it first
            if error.status != 404:
                raise
    jobs.wait_condition(kind, name, "Succeeded", timeout=60)
    return children


@pytest.mark.parametrize("path", PAIRS, ids=[p.stem for p in PAIRS])
def test_a_converted_job_makes_the_children_of_its_native_twin_and_succeeds(
    path: Path, operator: RunningOperator, jobs: Jobs
) -> None:
    old_documents = _documents(path)
    native_documents = _documents(path.with_name(f"{path.stem}.native.yaml"))
    assert len(old_documents) == len(native_documents)
    for index, (old, native) in enumerate(zip(old_documents, native_documents, strict=True)):
        conversion = convert(old, source=f"{path.name} document {index + 1}")
        kind = conversion.output["kind"]
        typed = load_job(conversion.output)
        expected_pods = sum(typed.summary().values())
        jobs.create(_runnable(conversion.output, f"conv{index}"))
        converted = _run_to_success(jobs, kind, f"conv{index}", expected_pods)
        jobs.create(_runnable(native, f"native{index}"))
        twin = _run_to_success(jobs, kind, f"native{index}", expected_pods)
        assert converted == twin, f"{path.name} document {index + 1}: children differ"


# --- a v1 job and its TrainJob --------------------------------------------------------------

TORCH_RUNTIME = (
    REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes/torch_distributed.yaml"
)
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
TORCH_LAYOUT = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK")


def _custom(jobs: Jobs, namespace: str, plural: str, name: str) -> dict[str, Any]:
    obj = jobs.custom.get_namespaced_custom_object(*TRAINER, namespace, plural, name)
    assert isinstance(obj, dict)
    return obj


def _torch_layout(pods: dict[str, dict[str, Any]], container: str) -> list[dict[str, str]]:
    """Each pod's torchrun layout, in node-rank order."""
    layouts = []
    for pod in pods.values():
        env = env_of(pod, container)
        layouts.append({name: env.get(name, "") for name in TORCH_LAYOUT})
    return sorted(layouts, key=lambda layout: layout["PET_NODE_RANK"])


def test_a_pytorchjob_and_its_trainjob_run_with_the_same_torch_layout_and_succeed(
    operator: RunningOperator, jobs: Jobs, dyn: DynamicClient, namespace: str
) -> None:
    """A PyTorchJob (Master + 2 Workers, 2 processes each) and the TrainJob
    ``kubetrain convert --to trainjob`` makes of it, on upstream's torch-distributed
    runtime (as a TrainingRuntime of the test's namespace, tolerating the GPU taint): the
    same PET_NNODES, PET_NPROC_PER_NODE and node ranks on the pods, and both finish."""
    runtime: dict[str, Any] = parse_yaml(TORCH_RUNTIME.read_text())
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = namespace
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["template"]["spec"]["tolerations"] = [GPU_TOLERATION]
    apply(dyn, runtime)
    v1 = pytorch_job("ddp", workers=2)
    conversion = convert(v1, to="trainjob", runtime="torch-distributed")
    trainjob = conversion.output
    trainjob["metadata"]["name"] = "ddp-trainjob"
    trainjob["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    group, version = TRAINER
    try:
        jobs.create(v1)
        v1_pods = jobs.wait_running("ddp", {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"})
        node_pods = _run_trainjob(jobs, trainjob, nodes=3)
        layout = _torch_layout(v1_pods, "pytorch")
        assert [entry["PET_NODE_RANK"] for entry in layout] == ["0", "1", "2"]
        assert {(e["PET_NNODES"], e["PET_NPROC_PER_NODE"]) for e in layout} == {("3", "2")}
        assert _torch_layout(node_pods, "node") == layout
        for pod in sorted(v1_pods):
            jobs.exit(pod, 0)
        for pod in sorted(node_pods):
            jobs.exit(pod, 0)
        jobs.wait_condition("PyTorchJob", "ddp", "Succeeded")
        wait_for(
            lambda: _custom(jobs, namespace, "trainjobs", "ddp-trainjob"),
            lambda obj: (condition(obj, "Complete") or {}).get("status") == "True",
            what="the TrainJob Complete",
        )
    finally:
        # TrainJobs first, while the operator runs: it then unmarks the runtime.
        jobs.custom.delete_collection_namespaced_custom_object(
            group, version, namespace, "trainjobs"
        )
        wait_for(
            lambda: _custom(jobs, namespace, "trainingruntimes", "torch-distributed"),
            lambda obj: (
                K.RUNTIME_IN_USE_ANNOTATION
                not in ((obj.get("metadata") or {}).get("annotations") or {})
            ),
            what="the runtime released by the operator",
        )


def _run_trainjob(jobs: Jobs, trainjob: dict[str, Any], *, nodes: int) -> dict[str, Any]:
    """Create ``trainjob`` in the test's namespace; its ``nodes`` node pods, once Running."""
    group, version = TRAINER
    name = trainjob["metadata"]["name"]
    jobs.custom.create_namespaced_custom_object(
        group, version, jobs.namespace, "trainjobs", trainjob
    )
    return wait_for(
        lambda: jobs._by_name(
            jobs.core.list_namespaced_pod(
                jobs.namespace, label_selector=f"{K.JOBSET_NAME_LABEL}={name}"
            )
        ),
        lambda pods: (
            len(pods) == nodes
            and all((p.get("status") or {}).get("phase") == "Running" for p in pods.values())
        ),
        what=f"the TrainJob's {nodes} node pods Running",
    )


# --- upstream's JAXJob and XGBoostJob examples and their TrainJobs ----------------------------

UPSTREAM_V1 = REPO_ROOT / "tests/data/upstream/training-operator-v1.9.0"
RUNTIMES = TORCH_RUNTIME.parent


@dataclass(frozen=True)
class Twin:
    """An upstream v1 example, the runtime its TrainJob names by default, its pods (by name
    suffix) and the variables that say each pod's place: its index and the count, as the v1
    kind's operator and as the TrainJob's policy name them."""

    example: str
    runtime: str
    pods: tuple[str, ...]
    container: str
    v1: tuple[str, str]
    trainjob: tuple[str, str]


TWINS = [
    Twin(
        "jax/cpu-demo/demo.yaml",
        "jax_distributed.yaml",
        ("worker-0", "worker-1"),
        "jax",
        ("PROCESS_ID", "NUM_PROCESSES"),
        ("JAX_PROCESS_ID", "JAX_NUM_PROCESSES"),
    ),
    Twin(
        "xgboost/smoke-dist/xgboostjob_v1_rabit_test.yaml",
        "xgboost_distributed.yaml",
        ("master-0", "worker-0", "worker-1"),
        "xgboost",
        ("RANK", "WORLD_SIZE"),
        ("DMLC_TASK_ID", "DMLC_NUM_WORKER"),
    ),
]


def _places(pods: dict[str, dict[str, Any]], container: str, names: tuple[str, str]) -> list[Any]:
    """Each pod's (index, count), by index."""
    envs = [env_of(pod, container) for pod in pods.values()]
    return sorted((int(env[names[0]]), int(env[names[1]])) for env in envs)


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: t.example.split("/")[0])
def test_an_upstream_job_and_its_trainjob_give_each_node_its_place_and_both_finish(
    twin: Twin, operator: RunningOperator, jobs: Jobs, dyn: DynamicClient, namespace: str
) -> None:
    """An upstream JAXJob or XGBoostJob example (unchanged but for its namespace) and the
    TrainJob ``kubetrain convert --to trainjob`` makes of it, on upstream's runtime of its
    framework (as a TrainingRuntime of the test's namespace): node i has the v1 pod i's
    index and count, under the policy's names, and both finish."""
    v1: dict[str, Any] = parse_yaml((UPSTREAM_V1 / twin.example).read_text())
    v1["metadata"]["namespace"] = namespace
    name = v1["metadata"]["name"]
    runtime: dict[str, Any] = parse_yaml((RUNTIMES / twin.runtime).read_text())
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = namespace
    apply(dyn, runtime)
    trainjob = convert(v1, to="trainjob").output
    assert trainjob["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    trainjob["metadata"]["name"] = f"{name}-tj"
    trainjob["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    try:
        jobs.create(v1)
        v1_pods = jobs.wait_running(name, {f"{name}-{pod}" for pod in twin.pods})
        node_pods = _run_trainjob(jobs, trainjob, nodes=len(twin.pods))
        count = len(twin.pods)
        expected = [(index, count) for index in range(count)]
        assert _places(v1_pods, twin.container, twin.v1) == expected
        assert _places(node_pods, "node", twin.trainjob) == expected
        for pod in [*sorted(v1_pods), *sorted(node_pods)]:
            try:
                jobs.exit(pod, 0)
            except ApiException as error:  # the operator's cleanup stopped it first
                if error.status != 404:
                    raise
        jobs.wait_condition(v1["kind"], name, "Succeeded")
        wait_for(
            lambda: _custom(jobs, namespace, "trainjobs", f"{name}-tj"),
            lambda obj: (condition(obj, "Complete") or {}).get("status") == "True",
            what="the TrainJob Complete",
        )
    finally:
        release_runtimes(jobs)
