"""A TrainJob resolved against its runtime, as upstream Trainer v2.3.0 merges them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.api.common import RestartPolicy
from kubetrain.api.errors import JobValidationError
from kubetrain.api.trainer.defaults import apply_trainer_defaults
from kubetrain.api.trainer.loader import load_trainer_object
from kubetrain.api.trainer.resolve import ResolvedTrainJob
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.frameworks.registry import resolve_trainjob
from kubetrain.manifest import parse_yaml_all
from tests.conftest import REPO_ROOT

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def rjob(name: str, container: str = "node", **extra: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {"template": {"spec": {"containers": [{"name": container, "image": "img:1"}]}}}
    }
    if extra.pop("trainer", False):
        template["metadata"] = {"labels": {ANCESTOR: "trainer"}}
    job: dict[str, Any] = {"name": name, "template": template}
    job.update(extra)
    return job


def runtime(policy: dict[str, Any], jobs: list[dict[str, Any]], **spec: Any) -> RuntimeBase:
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt", "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": policy, "template": {"spec": {"replicatedJobs": jobs, **spec}}},
    }
    loaded = load_trainer_object(obj)
    assert isinstance(loaded, RuntimeBase)
    return apply_trainer_defaults(loaded)


def trainjob(**spec: Any) -> TrainJob:
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "rt"}, **spec},
    }
    loaded = load_trainer_object(obj)
    assert isinstance(loaded, TrainJob)
    return apply_trainer_defaults(loaded)


def node(job: ResolvedTrainJob, name: str = "node", container: str = "node") -> dict[str, Any]:
    pod = job.spec.replicated_jobs[name].template["spec"]
    found: dict[str, Any] = next(c for c in pod["containers"] if c["name"] == container)
    return found


TORCH = {"numNodes": 2, "torch": {}}


def test_the_trainer_overrides_the_node_container_and_node_count() -> None:
    rt = runtime(TORCH, [rjob("node", trainer=True)])
    job = resolve_trainjob(
        trainjob(
            trainer={
                "numNodes": 4,
                "image": "mine:2",
                "command": ["bash", "-c", "run"],
                "args": ["--lr", "0.1"],
                "env": [{"name": "FOO", "value": "bar"}],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2.0}},
            }
        ),
        rt,
    )
    assert job.pods_of("node") == 4 and job.spec.num_nodes == 4
    container = node(job)
    assert container["image"] == "mine:2" and container["command"] == ["bash", "-c", "run"]
    assert container["args"] == ["--lr", "0.1"]
    assert container["env"] == [{"name": "FOO", "value": "bar"}]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 2.0}
    assert job.spec.replicated_jobs["node"].restart_policy is RestartPolicy.ON_FAILURE
    assert job.spec.framework == "torch" and job.spec.trainer_job == "node"


def test_the_runtime_node_count_is_the_default() -> None:
    job = resolve_trainjob(trainjob(), runtime(TORCH, [rjob("node", trainer=True)]))
    assert job.pods_of("node") == 2


def test_runtime_patches_merge_into_the_pods() -> None:
    base = rjob("node", trainer=True)
    base["template"]["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "a", "operator": "Exists"}
    ]
    base["template"]["spec"]["template"]["spec"]["containers"].append(
        {"name": "side", "image": "s"}
    )
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {"labels": {"pool": "h100"}},
                                        "spec": {
                                            "nodeSelector": {"gpu": "h100"},
                                            "tolerations": [{"key": "b", "operator": "Exists"}],
                                            "containers": [
                                                {
                                                    "name": "side",
                                                    "env": [{"name": "X", "value": "1"}],
                                                }
                                            ],
                                        },
                                    }
                                }
                            },
                        }
                    ]
                },
            }
        },
    }
    job = resolve_trainjob(trainjob(runtimePatches=[patch]), runtime(TORCH, [base]))
    pod = job.spec.replicated_jobs["node"].template
    assert pod["metadata"]["labels"]["pool"] == "h100"
    assert pod["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert [t["key"] for t in pod["spec"]["tolerations"]] == ["a", "b"]
    assert node(job, container="side")["env"] == [{"name": "X", "value": "1"}]
    assert job.spec.labels == {"team": "a"}


def test_pod_template_overrides_of_trainer_v2_1_merge_into_their_target_jobs() -> None:
    # What Kueue v0.15 writes on admission: one override per pod set, with the flavor's
    # node selector and tolerations and its pod-set label.
    base = rjob("node", trainer=True)
    base["template"]["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "a", "operator": "Exists"}
    ]
    overrides = [
        {
            "targetJobs": [{"name": "node"}],
            "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}},
            "spec": {
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            },
        },
        {"targetJobs": [{"name": "dataset-initializer"}], "spec": {"nodeSelector": {"x": "y"}}},
    ]
    job = resolve_trainjob(
        trainjob(podTemplateOverrides=overrides),
        runtime(TORCH, [rjob("dataset-initializer", "dataset-initializer"), base]),
    )
    pod = job.spec.replicated_jobs["node"].template
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node"
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert [t["key"] for t in pod["spec"]["tolerations"]] == ["a", "nvidia.com/gpu"]
    initializer = job.spec.replicated_jobs["dataset-initializer"].template
    assert initializer["spec"]["nodeSelector"] == {"x": "y"}


def initializer_job(step: str = "dataset-initializer") -> dict[str, Any]:
    """An initializer job as upstream's runtimes have it: its container mounts the
    ``initializer`` volume it downloads into."""
    job = rjob(step, step)
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    container["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    return job


def test_initializers_get_storage_uri_env_and_secret() -> None:
    rt = runtime(
        TORCH,
        [
            initializer_job(),
            rjob(
                "node",
                trainer=True,
                dependsOn=[{"name": "dataset-initializer", "status": "Complete"}],
            ),
        ],
    )
    job = resolve_trainjob(
        trainjob(
            initializer={
                "dataset": {
                    "storageUri": "hf://tatsu-lab/alpaca",
                    "env": [{"name": "ACCESS_TOKEN", "value": "t"}],
                    "secretRef": {"name": "hf"},
                }
            }
        ),
        rt,
    )
    init = node(job, "dataset-initializer", "dataset-initializer")
    assert init["env"] == [
        {"name": "STORAGE_URI", "value": "hf://tatsu-lab/alpaca"},
        {"name": "ACCESS_TOKEN", "value": "t"},
    ]
    assert init["envFrom"] == [{"secretRef": {"name": "hf"}}]
    assert job.pods_of("dataset-initializer") == 1
    (dep,) = job.spec.depends_on["node"]
    assert (dep.name, dep.status) == ("dataset-initializer", "Complete")


def test_mpi_with_the_launcher_as_a_node() -> None:
    policy = {"numNodes": 3, "mpi": {"runLauncherAsNode": True, "numProcPerNode": 2}}
    rt = runtime(
        policy,
        [
            rjob("node"),
            rjob("launcher", trainer=True, dependsOn=[{"name": "node", "status": "Ready"}]),
        ],
        successPolicy={"operator": "All", "targetReplicatedJobs": ["launcher"]},
    )
    job = resolve_trainjob(trainjob(trainer={"resourcesPerNode": {"limits": {"cpu": "4"}}}), rt)
    assert (job.pods_of("launcher"), job.pods_of("node")) == (1, 2)
    assert job.spec.success_targets == ["launcher"]
    # resourcesPerNode reaches the node job too when the launcher is a node.
    assert node(job, "node")["resources"]["limits"] == {"cpu": "4"}
    assert node(job, "launcher")["resources"]["limits"] == {"cpu": "4"}


def test_an_mpi_runtime_without_a_success_policy_succeeds_with_its_launcher() -> None:
    rt = runtime({"numNodes": 2, "mpi": {}}, [rjob("node"), rjob("launcher", trainer=True)])
    assert resolve_trainjob(trainjob(), rt).spec.success_targets == ["launcher"]


def test_run_policy_from_the_trainjob_and_the_runtime() -> None:
    job_template = rjob("node", trainer=True)
    job_template["template"]["spec"]["backoffLimit"] = 2
    rt = runtime(TORCH, [job_template], ttlSecondsAfterFinished=60)
    job = resolve_trainjob(trainjob(suspend=True, activeDeadlineSeconds=300), rt)
    policy = job.spec.run_policy
    assert (policy.suspend, policy.active_deadline_seconds) == (True, 300)
    assert (policy.ttl_seconds_after_finished, policy.backoff_limit) == (60, 2)
    assert policy.clean_pod_policy is None
    default = resolve_trainjob(trainjob(), runtime(TORCH, [rjob("node", trainer=True)]))
    assert default.spec.run_policy.backoff_limit == 6  # batch/v1's default


def test_in_order_startup_waits_for_each_job_ready() -> None:
    rt = runtime(
        TORCH,
        [rjob("a", "a"), rjob("b", "b"), rjob("node", trainer=True)],
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    job = resolve_trainjob(trainjob(), rt)
    assert {k: [(d.name, d.status) for d in v] for k, v in job.spec.depends_on.items()} == {
        "b": [("a", "Ready")],
        "node": [("b", "Ready")],
    }


@pytest.mark.parametrize(
    ("policy", "jobs", "fragment"),
    [
        (TORCH, [rjob("node")], "labelled trainer.kubeflow.org/trainjob-ancestor-step: trainer"),
        ({"numNodes": 2, "mpi": {}}, [rjob("node", trainer=True)], "a launcher replicated job"),
        # Its pods would run their command without Flux (upstream's examples/flux).
        (
            {"numNodes": 1, "flux": {}},
            [rjob("node", trainer=True)],
            "has mlPolicy.flux, and kubetrain has no Flux policy",
        ),
    ],
    ids=["no-trainer", "mpi-without-launcher", "flux"],
)
def test_runtimes_a_trainjob_cannot_use_are_explained(
    policy: dict[str, Any], jobs: list[dict[str, Any]], fragment: str
) -> None:
    with pytest.raises(JobValidationError) as err:
        resolve_trainjob(trainjob(), runtime(policy, copy.deepcopy(jobs)))
    assert fragment in str(err.value) and "ClusterTrainingRuntime rt" in str(err.value)


DATASET = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}}


@pytest.mark.parametrize(
    ("jobs", "problem"),
    [
        (
            [rjob("node", trainer=True)],
            "must have dataset-initializer job when trainJob is configured with input "
            "datasetConfig",
        ),
        (
            [rjob("dataset-initializer", "fetch"), rjob("node", trainer=True)],
            "must have container with name - dataset-initializer in the dataset-initializer job",
        ),
        (
            # Upstream's examples/yaml/05-multi-step.yaml: its webhook refuses it.
            [rjob("dataset-initializer", "dataset-initializer"), rjob("node", trainer=True)],
            "must have volumeMount with name - initializer in container dataset-initializer "
            "of the dataset-initializer job",
        ),
    ],
    ids=["no-job", "no-container", "no-volume-mount"],
)
def test_an_initializer_the_runtime_cannot_run_is_refused_in_upstreams_words(
    jobs: list[dict[str, Any]], problem: str
) -> None:
    with pytest.raises(JobValidationError) as caught:
        resolve_trainjob(trainjob(initializer=DATASET), runtime(TORCH, jobs))
    (error,) = caught.value.errors
    assert (error.path, error.expected) == ("spec.runtimeRef", problem)
    # The runtime is named plainly, not the TrainJob's runtimeRef as truncated JSON.
    assert str(error) == f"runtime rt (ClusterTrainingRuntime) is invalid: {problem}"


def test_a_runtime_patch_must_name_the_runtimes_jobs_and_containers() -> None:
    patches = [
        {
            "manager": "example.com/one",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "launcher"},
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {
                                            "spec": {
                                                "initContainers": [{"name": "warmup"}],
                                                "containers": [{"name": "node"}, {"name": "x"}],
                                            }
                                        }
                                    }
                                },
                            },
                        ]
                    }
                }
            },
        }
    ]
    with pytest.raises(JobValidationError) as caught:
        resolve_trainjob(
            trainjob(runtimePatches=patches), runtime(TORCH, [rjob("node", trainer=True)])
        )
    assert sorted((e.path, e.expected, e.value) for e in caught.value.errors) == [
        (
            "spec.runtimePatches[0]",
            "must not have container that doesn't exist in the runtime job node",
            "x",
        ),
        (
            "spec.runtimePatches[0]",
            "must not have initContainer that doesn't exist in the runtime job node",
            "warmup",
        ),
        (
            "spec.runtimePatches[0]",
            "must not have replicated job that doesn't exist in the runtime job template "
            "(ClusterTrainingRuntime rt has node)",
            "launcher",
        ),
    ]


def test_upstreams_multi_step_example_is_refused_as_upstreams_webhook_refuses_it() -> None:
    # examples/yaml/05-multi-step.yaml at v2.3.0: its dataset-initializer container has
    # no "initializer" volumeMount, so nothing would carry the dataset to the trainer.
    path = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/examples/yaml/05-multi-step.yaml"
    runtime_doc, job_doc = (d for d in parse_yaml_all(path.read_text()) if d)
    loaded_runtime, loaded_job = load_trainer_object(runtime_doc), load_trainer_object(job_doc)
    assert isinstance(loaded_runtime, RuntimeBase) and isinstance(loaded_job, TrainJob)
    with pytest.raises(JobValidationError) as caught:
        resolve_trainjob(apply_trainer_defaults(loaded_job), apply_trainer_defaults(loaded_runtime))
    (error,) = caught.value.errors
    assert str(error) == (
        "runtime torch-with-dataset-init (TrainingRuntime) is invalid: must have volumeMount "
        "with name - initializer in container dataset-initializer of the dataset-initializer job"
    )
