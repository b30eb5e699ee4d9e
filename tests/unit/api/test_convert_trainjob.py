"""v1 jobs to Trainer v2 TrainJobs (kubetrain.api.convert.trainjob): upstream's examples and
kubetrain's convert to valid TrainJobs, field by field, with a note naming every field that
is not carried; what cannot become a TrainJob is refused; and a PyTorchJob and its TrainJob
give their nodes the same torchrun layout and both succeed."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import JobValidationError
from kubetrain.api.convert import trainjob as convert_trainjob
from kubetrain.api.convert.report import Conversion, NoteKind
from kubetrain.api.convert.trainjob import KNOWN_RUNTIMES, MANAGER, to_trainjob
from kubetrain.api.trainer import TrainJob, load_trainer_object
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.reconciler import Reconciler
from kubetrain.manifest import parse_yaml_all
from kubetrain.synth import render_stack
from tests.builders.observed import NOW, stamp
from tests.conftest import REPO_ROOT
from tests.unit.controller.memory_cluster import MemoryCluster

DATA = REPO_ROOT / "tests" / "data" / "upstream"
RUNTIMES = DATA / "trainer-v2.3.0" / "manifests" / "base" / "runtimes"
JAX = DATA / "training-operator-v1.9.0" / "jax"
XGBOOST = DATA / "training-operator-v1.9.0" / "xgboost"
#: Upstream's XGBoost training examples give the Master (which saves the model) arguments
#: the Workers lack: a TrainJob runs one template on every node, so they are refused.
XGBOOST_TWO_TEMPLATES = [
    XGBOOST / "xgboostjob.yaml",
    XGBOOST / "xgboost-dist" / "xgboostjob_v1_iris_train.yaml",
    XGBOOST / "xgboost-dist" / "xgboostjob_v1_iris_train_local.yaml",
]
V1_JOBS = sorted(
    [
        *(DATA / "training-operator-v1.9.0" / "pytorch").rglob("*.yaml"),
        *(DATA / "mpi-operator-v0.8.0").rglob("*.yaml"),
        *JAX.rglob("*.yaml"),
        *(p for p in XGBOOST.rglob("*.yaml") if p not in XGBOOST_TWO_TEMPLATES),
        *(REPO_ROOT / "examples" / name for name in ("pytorchjob.yaml", "pytorchjob-elastic.yaml")),
        REPO_ROOT / "examples" / "mpijob.yaml",
    ]
)
#: The runtime a kind's TrainJob names when none is asked for.
DEFAULT_RUNTIMES = {
    "PyTorchJob": "torch-distributed",
    "MPIJob": "deepspeed-distributed",
    "JAXJob": "jax-distributed",
    "XGBoostJob": "xgboost-distributed",
}


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in parse_yaml_all(path.read_text()) if d]


def notes(conv: Conversion, kind: NoteKind) -> dict[str, Any]:
    return {n.path: n.value for n in conv.notes if n.kind is kind}


def container(name: str = "pytorch", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "example/trainer:1", "command": ["torchrun", "t.py"], **fields}


def pytorchjob(
    workers: int = 1, template: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    template = template or {"spec": {"containers": [container()]}}
    replica = {"restartPolicy": "OnFailure", "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "ns"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **copy.deepcopy(replica)},
                "Worker": {"replicas": workers, **copy.deepcopy(replica)},
            },
            **spec,
        },
    }


@pytest.mark.parametrize("path", V1_JOBS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_upstream_and_example_jobs_convert_to_valid_trainjobs(path: Path) -> None:
    for index, doc in enumerate(documents(path)):
        conv = to_trainjob(doc, runtime=None, source=f"{path.name}#{index}")
        job = load_trainer_object(conv.output)
        assert isinstance(job, TrainJob)
        assert job.spec.runtime_ref.name == DEFAULT_RUNTIMES[doc["kind"]]
        assert job.spec.trainer is not None and job.spec.trainer.image
        assert job.spec.trainer.num_nodes and job.spec.trainer.num_nodes >= 1
        if doc["kind"] != "MPIJob":  # every replica is a node (MPI: the hostfile's hosts)
            specs = next(v for k, v in doc["spec"].items() if k.endswith("ReplicaSpecs"))
            replicas = sum(spec.get("replicas", 1) for spec in specs.values())
            assert job.spec.trainer.num_nodes == replicas
        # One DECIDE note names the runtime chosen; every note has a path.
        assert any(n.target == "spec.runtimeRef.name" for n in conv.notes)
        assert all(n.path for n in conv.notes)


def test_the_migration_guides_pytorchjob_gives_the_guides_trainjob() -> None:
    (doc,) = documents(DATA / "training-operator-v1.9.0" / "pytorch" / "simple.yaml")
    conv = to_trainjob(doc, runtime=None)
    # Upstream's guide: numNodes 2 on torch-distributed, with the container's image and command.
    assert conv.output["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "kind": "ClusterTrainingRuntime",
    }
    assert conv.output["spec"]["trainer"] == {
        "numNodes": 2,
        "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
        "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
    }
    assert conv.output["metadata"] == {"name": "pytorch-simple", "namespace": "kubeflow"}
    master = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"
    assert notes(conv, NoteKind.DROPPED) == {f"{master}.imagePullPolicy": "Always"}
    assert not conv.complete
    assert notes(conv, NoteKind.DECIDE)[f"{master}.name"] == "pytorch"


def test_pytorchjob_field_by_field() -> None:
    pod = {
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {
            "containers": [
                container(
                    env=[{"name": "LR", "value": "0.1"}, {"name": "PET_NNODES", "value": "9"}],
                    args=["--epochs", "3"],
                    resources={"limits": {"nvidia.com/gpu": 8}},
                    volumeMounts=[{"name": "data", "mountPath": "/data"}],
                    ports=[{"name": "pytorchjob-port", "containerPort": 23456}],
                ),
                {"name": "sidecar", "image": "proxy:1"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "nodeSelector": {"pool": "h100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "serviceAccountName": "trainer",
            "priorityClassName": "high",
        },
    }
    run_policy = {
        "suspend": True,
        "activeDeadlineSeconds": 600,
        "backoffLimit": 3,
        "cleanPodPolicy": "All",
        "ttlSecondsAfterFinished": 60,
        "schedulingPolicy": {"queue": "q"},
        "managedBy": "kueue.x-k8s.io/multikueue",
    }
    raw = pytorchjob(3, pod, nprocPerNode="4", runPolicy=run_policy)
    conv = to_trainjob(raw, runtime="torch-h100-ib", source="job.yaml")
    spec = conv.output["spec"]
    assert spec["runtimeRef"]["name"] == "torch-h100-ib"
    assert spec["trainer"] == {
        "numNodes": 4,  # Master + 3 Workers
        "image": "example/trainer:1",
        "command": ["torchrun", "t.py"],
        "args": ["--epochs", "3"],
        "env": [{"name": "LR", "value": "0.1"}],
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}},
        "numProcPerNode": 4,
    }
    assert (spec["suspend"], spec["activeDeadlineSeconds"], spec["managedBy"]) == (
        True,
        600,
        "kueue.x-k8s.io/multikueue",
    )
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == MANAGER
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    assert node["template"]["spec"]["template"] == {
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {
            "nodeSelector": {"pool": "h100"},
            "serviceAccountName": "trainer",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
            ],
        },
    }
    c0 = "spec.pytorchReplicaSpecs.Master.template.spec.containers"
    assert notes(conv, NoteKind.DROPPED) == {
        f"{c0}[0].env[1]": {"name": "PET_NNODES", "value": "9"},
        f"{c0}[0].ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
        f"{c0}[1]": "sidecar",
        "spec.pytorchReplicaSpecs.Master.template.spec.priorityClassName": "high",
        "spec.runPolicy.backoffLimit": 3,
        "spec.runPolicy.cleanPodPolicy": "All",
        "spec.runPolicy.ttlSecondsAfterFinished": 60,
        "spec.runPolicy.schedulingPolicy": {"queue": "q"},
    }
    lines = [n.line() for n in conv.notes]
    assert f'dropped: {c0}[0].env[1] ({{"name": "PET_NNODES", "value": "9"}}): the runtime' in (
        "\n".join(lines)
    )
    assert "dropped: spec.runPolicy.backoffLimit (3): " in "\n".join(lines)
    load_trainer_object(conv.output)


def test_master_only_labels_are_merged_with_a_note() -> None:
    raw = pytorchjob()
    master = raw["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    master["metadata"] = {"annotations": {"sidecar.istio.io/inject": "false"}}
    conv = to_trainjob(raw, runtime=None)
    (patch,) = conv.output["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod_meta = node["template"]["spec"]["template"]["metadata"]
    assert pod_meta == {"annotations": {"sidecar.istio.io/inject": "false"}}
    path = "spec.pytorchReplicaSpecs.Master.template.metadata.annotations.sidecar.istio.io/inject"
    assert notes(conv, NoteKind.DECIDE)[path] == "false"


def test_rejects_master_and_worker_templates_that_differ() -> None:
    raw = pytorchjob()
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = (
        "other:2"
    )
    with pytest.raises(JobValidationError) as caught:
        to_trainjob(raw, runtime=None, source="job.yaml")
    (error,) = caught.value.errors
    assert error.path == "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image"
    assert error.value == "other:2"
    assert 'the Master\'s value ("example/trainer:1")' in error.expected
    assert "one pod template on every node" in str(caught.value)


def test_rejects_a_tfjob() -> None:
    (tfjob,) = documents(REPO_ROOT / "examples" / "tfjob.yaml")
    with pytest.raises(JobValidationError) as caught:
        to_trainjob(tfjob, runtime=None, source="tfjob.yaml")
    (error,) = caught.value.errors
    assert (error.path, error.value) == ("kind", "TFJob")
    assert "Trainer v2 has no TensorFlow runtime" in str(caught.value)


@pytest.mark.parametrize("path", XGBOOST_TWO_TEMPLATES, ids=lambda p: p.name)
def test_rejects_upstream_xgboost_jobs_whose_master_has_its_own_args(path: Path) -> None:
    (doc,) = documents(path)
    with pytest.raises(JobValidationError) as caught:
        to_trainjob(doc, runtime=None, source=path.name)
    (error,) = caught.value.errors
    # The first difference: the Master's extra arguments (or, where it has as many, the
    # first argument that differs).
    args = "spec.xgbReplicaSpecs.Worker.template.spec.containers[0].args"
    assert error.path in (args, f"{args}[1]")
    assert "the Master's value (" in error.expected
    assert "Master and Worker may differ in labels and annotations only" in error.expected


def test_rejects_a_paddlejob_and_says_why() -> None:
    (paddle,) = documents(DATA / "training-operator-v1.9.0" / "paddlepaddle" / "simple-cpu.yaml")
    with pytest.raises(JobValidationError) as caught:
        to_trainjob(paddle, runtime=None, source="simple-cpu.yaml")
    (error,) = caught.value.errors
    assert (error.path, error.value) == ("kind", "PaddleJob")
    assert "no PaddlePaddle policy" in error.expected
    assert "keep the PaddleJob, which kubetrain serves" in error.expected
    assert "PyTorchJob, MPIJob, JAXJob or XGBoostJob" in error.expected


def test_rejects_a_runtime_of_another_framework_and_an_invalid_job() -> None:
    with pytest.raises(JobValidationError, match="jax-distributed is a jax runtime"):
        to_trainjob(pytorchjob(), runtime="jax-distributed")
    broken = pytorchjob()
    broken["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    with pytest.raises(JobValidationError, match=r"Worker\.replicas"):
        to_trainjob(broken, runtime=None)


def test_an_unknown_runtime_is_used_with_a_decide_note() -> None:
    conv = to_trainjob(pytorchjob(), runtime="team-torch")
    assert conv.output["spec"]["runtimeRef"]["name"] == "team-torch"
    (note,) = [n for n in conv.notes if n.target == "spec.runtimeRef.name"]
    assert note.kind is NoteKind.DECIDE and "mlPolicy.torch" in note.message


def test_nproc_auto_and_elastic_policy_are_noted() -> None:
    raw = pytorchjob(elasticPolicy={"maxReplicas": 3, "rdzvBackend": "c10d"}, nprocPerNode="auto")
    conv = to_trainjob(raw, runtime=None)
    assert "numProcPerNode" not in conv.output["spec"]["trainer"]
    assert notes(conv, NoteKind.DECIDE)["spec.nprocPerNode"] == "auto"
    dropped = notes(conv, NoteKind.DROPPED)
    assert dropped["spec.elasticPolicy.maxReplicas"] == 3
    assert dropped["spec.elasticPolicy.rdzvBackend"] == "c10d"


def test_mpijob_field_by_field() -> None:
    (pi,) = documents(DATA / "mpi-operator-v0.8.0" / "pi" / "pi.yaml")
    conv = to_trainjob(pi, runtime="deepspeed-distributed")
    spec = conv.output["spec"]
    assert spec["trainer"] == {
        "numNodes": 2,  # the hostfile's two Workers
        "numProcPerNode": 1,  # slotsPerWorker
        "image": "mpioperator/mpi-pi:openmpi",
        "command": ["mpirun"],
        "args": ["-n", "2", "/home/mpiuser/pi"],
        "resourcesPerNode": {"limits": {"cpu": 1, "memory": "1Gi"}},
    }
    jobs = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["launcher", "node"]
    for job in jobs:
        assert job["template"]["spec"]["template"]["spec"]["containers"] == [
            {"name": "node", "securityContext": {"runAsUser": 1000}}
        ]
    worker = "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]"
    decide = notes(conv, NoteKind.DECIDE)
    assert decide[f"{worker}.command"] == ["/usr/sbin/sshd"]
    assert decide["spec.runLauncherAsWorker"] is False  # the runtime's launcher hosts ranks
    assert notes(conv, NoteKind.DROPPED) == {
        "spec.runPolicy.cleanPodPolicy": "Running",
        "spec.runPolicy.ttlSecondsAfterFinished": 60,
    }


def test_mpijob_launcher_as_worker_counts_as_a_node() -> None:
    (pi,) = documents(DATA / "mpi-operator-v0.8.0" / "pi" / "pi.yaml")
    pi["spec"]["runLauncherAsWorker"] = True
    pi["spec"]["mpiImplementation"] = "MPICH"
    conv = to_trainjob(pi, runtime=None)
    assert conv.output["spec"]["trainer"]["numNodes"] == 3
    assert "spec.runLauncherAsWorker" not in notes(conv, NoteKind.DECIDE)
    assert notes(conv, NoteKind.DROPPED)["spec.mpiImplementation"] == "MPICH"


def test_jaxjob_field_by_field() -> None:
    (demo,) = documents(JAX / "cpu-demo" / "demo.yaml")
    conv = to_trainjob(demo, runtime=None, source="demo.yaml")
    assert conv.output["metadata"] == {"name": "jaxjob-simple", "namespace": "kubeflow"}
    spec = conv.output["spec"]
    assert spec == {
        "runtimeRef": {"kind": "ClusterTrainingRuntime", "name": "jax-distributed"},
        "trainer": {
            "numNodes": 2,  # every Worker is one JAX process; node 0 plays Worker 0
            "image": "docker.io/kubeflow/jaxjob-simple:latest",
            "command": ["python3", "train.py"],
        },
    }
    worker = "spec.jaxReplicaSpecs.Worker"
    assert notes(conv, NoteKind.DROPPED) == {
        f"{worker}.template.spec.containers[0].imagePullPolicy": "Always"
    }
    decide = notes(conv, NoteKind.DECIDE)
    assert decide[f"{worker}.restartPolicy"] == "OnFailure"
    assert decide[f"{worker}.template.spec.containers[0].name"] == "jax"
    lines = [n.line() for n in conv.notes]
    assert (
        f"carried: {worker}.replicas -> spec.trainer.numNodes (2): a TrainJob's node 0 plays "
        "Worker 0" in lines
    )
    assert (
        'decide: kind ("JAXJob"): the program reads JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, '
        "JAX_PROCESS_ID" in "\n".join(lines)
    )


def test_xgboostjob_field_by_field() -> None:
    (rabit,) = documents(XGBOOST / "smoke-dist" / "xgboostjob_v1_rabit_test.yaml")
    rabit["spec"]["runPolicy"] = {"cleanPodPolicy": "None", "activeDeadlineSeconds": 900}
    conv = to_trainjob(rabit, runtime="xgboost-distributed")
    spec = conv.output["spec"]
    assert spec["runtimeRef"]["name"] == "xgboost-distributed"
    assert spec["trainer"] == {
        "numNodes": 3,  # the Master (node 0, the tracker) and 2 Workers
        "image": "docker.io/kubeflow/xgboost-dist-rabit-test:latest",
    }
    assert spec["activeDeadlineSeconds"] == 900
    master = "spec.xgbReplicaSpecs.Master"
    assert notes(conv, NoteKind.DROPPED) == {
        f"{master}.template.spec.containers[0].imagePullPolicy": "Always",
        f"{master}.template.spec.containers[0].ports": [
            {"containerPort": 9991, "name": "xgboostjob-port"}
        ],
        f"{master}.restartPolicy": "Never",
        "spec.xgbReplicaSpecs.Worker.restartPolicy": "Never",
        "spec.runPolicy.cleanPodPolicy": "None",
    }
    decide = notes(conv, NoteKind.DECIDE)
    assert decide[f"{master}.template.spec.containers[0].command"] is None  # the image's
    lines = "\n".join(n.line() for n in conv.notes)
    assert "spec.trainer.numNodes (3): a TrainJob's node 0 plays the Master" in lines
    assert 'decide: kind ("XGBoostJob"): the program reads DMLC_TRACKER_URI' in lines


def test_output_is_deterministic() -> None:
    raw = documents(REPO_ROOT / "examples" / "pytorchjob.yaml")[0]
    reordered = json.loads(json.dumps(raw, sort_keys=True))
    first, second = to_trainjob(raw, runtime=None), to_trainjob(reordered, runtime=None)
    assert json.dumps(first.output) == json.dumps(second.output)
    assert [n.line() for n in first.notes] == [n.line() for n in second.notes]


def test_known_runtimes_are_the_shipped_runtimes() -> None:
    shipped = [d for p in RUNTIMES.glob("*.yaml") for d in documents(p)]
    for stack in ("local", "h100-infiniband", "p5-efa", "a3-mega-tcpxo"):
        for chart in render_stack(stack, root=REPO_ROOT):
            shipped += [o for o in chart.objects if o.get("kind") == "ClusterTrainingRuntime"]
    seen = set()
    for runtime in shipped:
        name = runtime["metadata"]["name"]
        policy = runtime["spec"].get("mlPolicy") or {}
        framework = next((k for k in policy if k != "numNodes"), None)
        mpi = policy.get("mpi") or {}
        known = KNOWN_RUNTIMES[name]
        assert known.framework == (
            framework or runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"]
        ), name
        assert known.run_launcher_as_node == bool(mpi.get("runLauncherAsNode")), name
        assert known.ssh_auth_mount_path == mpi.get("sshAuthMountPath"), name
        seen.add(name)
    assert seen == set(KNOWN_RUNTIMES)


# -- the same layout, and both succeed ------------------------------------------------------


def _set_phase(pod: dict[str, Any], phase: str) -> None:
    name = pod["spec"]["containers"][0]["name"]
    state: dict[str, Any] = {"running": {"startedAt": stamp(10)}}
    if phase == "Succeeded":
        state = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
    pod["metadata"]["creationTimestamp"] = stamp(10)
    pod["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": str(phase == "Running")}],
        "containerStatuses": [{"name": name, "restartCount": 0, "state": state}],
    }


def _reconcile_to_success(
    cluster: MemoryCluster, reconciler: Reconciler, key: Any
) -> list[dict[str, Any]]:
    """Reconcile until every pod exists (each Running and Ready once made), then let them
    all succeed; the pods as the operator made them."""
    made: dict[str, dict[str, Any]] = {}
    for _ in range(4):  # a PyTorchJob's Workers start once its Master is Ready
        reconciler.reconcile(key)
        for name, pod in cluster.children["Pod"].items():
            if name not in made:
                made[name] = copy.deepcopy(pod)
                _set_phase(pod, "Running")
    for pod in cluster.children["Pod"].values():
        _set_phase(pod, "Succeeded")
    reconciler.reconcile(key)
    reconciler.reconcile(key)
    return list(made.values())


def _env(pod: dict[str, Any]) -> dict[str, str]:
    """The main container's variables as the kubelet resolves them (a fieldRef to an
    annotation reads the pod's annotation)."""
    annotations = pod["metadata"].get("annotations") or {}
    env = {}
    for item in pod["spec"]["containers"][0].get("env") or []:
        if "valueFrom" in item:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            key = path.removeprefix("metadata.annotations['").removesuffix("']")
            env[item["name"]] = annotations[key]
        else:
            env[item["name"]] = item.get("value")
    return env


def _torch_env(pod: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in _env(pod).items() if k.startswith("PET_")}


@dataclass
class Ran:
    """A v1 job and the TrainJob converted from it, each reconciled to its end: the pods
    each made and whether each succeeded."""

    conv: Conversion
    v1_pods: list[dict[str, Any]]
    tj_pods: list[dict[str, Any]]
    v1_succeeded: bool
    tj_complete: bool


def _run_v1_and_its_trainjob(raw: dict[str, Any], runtime_file: str) -> Ran:
    """``raw`` and its TrainJob on upstream's runtime ``runtime_file`` (the runtime it
    names by default), one after the other in one memory cluster."""
    raw = copy.deepcopy(raw)
    raw["metadata"].setdefault("namespace", "default")
    raw["metadata"].update(uid="v1-uid", creationTimestamp=stamp(5))
    conv = to_trainjob(raw, runtime=None)
    (runtime,) = documents(RUNTIMES / runtime_file)
    runtime["metadata"]["uid"] = "rt-uid"
    assert conv.output["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    trainjob = copy.deepcopy(conv.output)
    trainjob["metadata"].update(uid="tj-uid", creationTimestamp=stamp(5))

    cluster = MemoryCluster()
    cluster.runtimes[("ClusterTrainingRuntime", "", runtime["metadata"]["name"])] = runtime
    plugins = build_registry((raw["kind"], "TrainJob"))
    reconciler = Reconciler(cluster, cluster, plugins, clock=lambda: NOW)
    v1_key, tj_key = cluster.add_job(raw), cluster.add_job(trainjob)
    v1_pods = _reconcile_to_success(cluster, reconciler, v1_key)
    cluster.children["Pod"].clear()
    tj_pods = _reconcile_to_success(cluster, reconciler, tj_key)
    succeeded, complete = (
        cluster.condition(v1_key, "Succeeded"),
        cluster.condition(tj_key, "Complete"),
    )
    return Ran(
        conv,
        v1_pods,
        tj_pods,
        succeeded is not None and succeeded["status"] == "True",
        complete is not None and complete["status"] == "True",
    )


def test_a_pytorchjob_and_its_trainjob_give_the_same_torch_env_and_both_succeed() -> None:
    ran = _run_v1_and_its_trainjob(pytorchjob(1, nprocPerNode="2"), "torch_distributed.yaml")
    v1, tj = (
        {_torch_env(p)["PET_NODE_RANK"]: _torch_env(p) for p in pods}
        for pods in (ran.v1_pods, ran.tj_pods)
    )
    assert set(v1) == set(tj) == {"0", "1"}
    for rank in ("0", "1"):
        same = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK")
        assert {k: v1[rank][k] for k in same} == {k: tj[rank][k] for k in same}
        assert (v1[rank]["PET_NNODES"], v1[rank]["PET_NPROC_PER_NODE"]) == ("2", "2")
        # By design: rank 0's address follows each kind's naming, and the port each
        # kind's rendezvous uses (PyTorchJob's pytorchjob-port, Trainer's 29500).
        assert (v1[rank]["PET_MASTER_ADDR"], v1[rank]["PET_MASTER_PORT"]) == (
            "ddp-master-0",
            "23456",
        )
        assert (tj[rank]["PET_MASTER_ADDR"], tj[rank]["PET_MASTER_PORT"]) == (
            "ddp-node-0-0.ddp",
            "29500",
        )
    assert ran.v1_succeeded and ran.tj_complete


def _by(pods: list[dict[str, Any]], variable: str) -> dict[str, dict[str, str]]:
    """Each pod's variables (and its name, as ``POD``) by the value of ``variable``."""
    return {_env(p)[variable]: {**_env(p), "POD": p["metadata"]["name"]} for p in pods}


def _assert_the_env_note_names_what_differs(ran: Ran, kind: str) -> None:
    """The report's note on the environment names every variable the TrainJob's policy
    sets in place of the v1 kind's, and every v1 variable it no longer sets (the pods, not
    the converter, say which: PYTHONUNBUFFERED, logging only, and the Job controller's
    JOB_COMPLETION_INDEX aside)."""
    v1_names = set().union(*(_env(p) for p in ran.v1_pods)) - {"PYTHONUNBUFFERED"}
    tj_names = set().union(*(_env(p) for p in ran.tj_pods)) - {"JOB_COMPLETION_INDEX"}
    env = convert_trainjob.TO_TRAINJOB[kind].env
    assert env is not None
    assert set(env.reads) == tj_names - v1_names
    assert set(env.instead_of) == v1_names - tj_names
    (note,) = [n for n in ran.conv.notes if n.path == "kind" and n.target is None]
    assert note.kind is NoteKind.DECIDE and note.value == kind
    assert all(name in note.message for name in (*env.reads, *env.instead_of))


def test_upstream_jaxjob_and_its_trainjob_give_each_process_its_place_and_both_succeed() -> None:
    (demo,) = documents(JAX / "cpu-demo" / "demo.yaml")
    ran = _run_v1_and_its_trainjob(demo, "jax_distributed.yaml")
    v1, tj = _by(ran.v1_pods, "PROCESS_ID"), _by(ran.tj_pods, "JAX_PROCESS_ID")
    assert set(v1) == set(tj) == {"0", "1"}
    for index in ("0", "1"):
        assert (v1[index]["POD"], tj[index]["POD"]) == (
            f"jaxjob-simple-worker-{index}",
            f"jaxjob-simple-node-0-{index}",
        )
        assert v1[index]["NUM_PROCESSES"] == tj[index]["JAX_NUM_PROCESSES"] == "2"
        # The coordinator: Worker 0 on the jaxjob-port; node 0 on Trainer's 29500.
        assert (v1[index]["COORDINATOR_ADDRESS"], v1[index]["COORDINATOR_PORT"]) == (
            "jaxjob-simple-worker-0",
            "6666",
        )
        assert tj[index]["JAX_COORDINATOR_ADDRESS"] == "jaxjob-simple-node-0-0.jaxjob-simple:29500"
    _assert_the_env_note_names_what_differs(ran, "JAXJob")
    assert ran.v1_succeeded and ran.tj_complete


def test_upstream_xgboostjob_and_its_trainjob_give_each_rank_its_place_and_both_succeed() -> None:
    (rabit,) = documents(XGBOOST / "smoke-dist" / "xgboostjob_v1_rabit_test.yaml")
    ran = _run_v1_and_its_trainjob(rabit, "xgboost_distributed.yaml")
    v1, tj = _by(ran.v1_pods, "RANK"), _by(ran.tj_pods, "DMLC_TASK_ID")
    assert set(v1) == set(tj) == {"0", "1", "2"}
    # Node 0 plays the Master, which runs the tracker; the Workers follow in order.
    assert [v1[r]["POD"] for r in ("0", "1", "2")] == [
        "xgboost-dist-test-master-0",
        "xgboost-dist-test-worker-0",
        "xgboost-dist-test-worker-1",
    ]
    assert [tj[r]["POD"] for r in ("0", "1", "2")] == [
        f"xgboost-dist-test-node-0-{i}" for i in range(3)
    ]
    for rank in ("0", "1", "2"):
        assert v1[rank]["WORLD_SIZE"] == tj[rank]["DMLC_NUM_WORKER"] == "3"
        assert (v1[rank]["MASTER_ADDR"], v1[rank]["MASTER_PORT"]) == (
            "xgboost-dist-test-master-0",
            "9991",
        )
        assert (tj[rank]["DMLC_TRACKER_URI"], tj[rank]["DMLC_TRACKER_PORT"]) == (
            "xgboost-dist-test-node-0-0.xgboost-dist-test",
            "29500",
        )
    _assert_the_env_note_names_what_differs(ran, "XGBoostJob")
    assert ran.v1_succeeded and ran.tj_complete
