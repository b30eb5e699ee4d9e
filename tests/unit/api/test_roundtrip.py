"""Parse then serialize gives back the wire form, for the examples and generated jobs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api import MPIJob, PyTorchJob, TFJob, load_job
from tests.builders.jobs import example, mpi_job, pytorch_job, template, tf_job

EXAMPLES = {
    "pytorch-master-3-workers": ("pytorchjob.yaml", PyTorchJob),
    "tf-ps-2-workers": ("tfjob.yaml", TFJob),
    "mpi-2x8-slots": ("mpijob.yaml", MPIJob),
    "pytorch-elastic": ("pytorchjob-elastic.yaml", PyTorchJob),
}


@pytest.mark.parametrize("name", EXAMPLES, ids=list(EXAMPLES))
def test_example_round_trips(name: str) -> None:
    file, model = EXAMPLES[name]
    wire = example(file)
    job = load_job(wire)
    assert isinstance(job, model)
    assert job.to_wire() == wire


def test_pytorch_example_has_the_documented_shape() -> None:
    job = load_job(example("pytorchjob.yaml"))
    assert isinstance(job, PyTorchJob)
    assert job.summary() == {"Master": 1, "Worker": 3}
    assert job.spec.nproc_per_node == "8"
    assert job.spec.run_policy is not None and job.spec.run_policy.backoff_limit == 3


def test_mpi_example_has_the_documented_shape() -> None:
    job = load_job(example("mpijob.yaml"))
    assert isinstance(job, MPIJob)
    assert job.spec.slots_per_worker == 8
    assert job.summary() == {"Launcher": 1, "Worker": 2}


def test_status_round_trips() -> None:
    wire = pytorch_job()
    wire["status"] = {
        "conditions": [
            {
                "type": "Running",
                "status": "True",
                "reason": "PyTorchJobRunning",
                "message": "all pods are running",
                "lastUpdateTime": "2026-11-22T10:00:00Z",
                "lastTransitionTime": "2026-11-22T10:00:00Z",
            }
        ],
        "replicaStatuses": {
            "Worker": {"active": 2, "selector": "training.kubeflow.org/job-name=job"}
        },
        "startTime": "2026-11-22T09:59:58Z",
    }
    assert load_job(wire).to_wire() == wire


_names = st.from_regex(r"[a-z][a-z0-9]{0,20}", fullmatch=True)
_replicas = st.integers(min_value=0, max_value=64)
_restart = st.sampled_from(["Always", "OnFailure", "Never", "ExitCode"])
_run_policy = st.fixed_dictionaries(
    {},
    optional={
        "cleanPodPolicy": st.sampled_from(["All", "Running", "None"]),
        "ttlSecondsAfterFinished": st.integers(0, 10**6),
        "activeDeadlineSeconds": st.integers(0, 10**9),
        "backoffLimit": st.integers(0, 100),
        "suspend": st.booleans(),
        "schedulingPolicy": st.fixed_dictionaries(
            {},
            optional={
                "minAvailable": st.integers(0, 100),
                "queue": _names,
                "minResources": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                    st.one_of(st.integers(0, 64), st.sampled_from(["500m", "16Gi", "1e3"])),
                ),
                "priorityClass": _names,
            },
        ),
    },
)


def _replica(
    container: str, replicas: st.SearchStrategy[int] = _replicas
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"template": st.just(template(container))},
        optional={"replicas": replicas, "restartPolicy": _restart},
    )


@st.composite
def _pytorch_jobs(draw: st.DrawFn) -> dict[str, Any]:
    # Valid PyTorchJobs, as upstream's webhook defines them: a Worker has at least one
    # replica, a Master exactly one.
    specs: dict[str, Any] = {"Worker": draw(_replica("pytorch", st.integers(1, 64)))}
    if draw(st.booleans()):
        specs["Master"] = {**draw(_replica("pytorch")), "replicas": 1}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs, "runPolicy": draw(_run_policy)}
    if draw(st.booleans()):
        spec["nprocPerNode"] = draw(st.sampled_from(["auto", "cpu", "gpu", "1", "8"]))
    job = pytorch_job(**spec)
    job["spec"]["pytorchReplicaSpecs"] = specs
    return job


@st.composite
def _mpi_jobs(draw: st.DrawFn) -> dict[str, Any]:
    job = mpi_job(
        slotsPerWorker=draw(st.integers(0, 8)),
        runPolicy=draw(_run_policy),
        mpiImplementation=draw(st.sampled_from(["OpenMPI", "Intel", "MPICH"])),
    )
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = draw(st.integers(1, 32))
    return job


@st.composite
def _tf_jobs(draw: st.DrawFn) -> dict[str, Any]:
    specs = {
        rtype: draw(_replica("tensorflow"))
        for rtype in draw(st.sets(st.sampled_from(["PS", "Worker", "Evaluator"]), min_size=1))
    }
    if draw(st.booleans()):
        specs["Chief"] = {"replicas": 1, "template": template("tensorflow")}
    job = tf_job(successPolicy=draw(st.sampled_from(["", "AllWorkers"])))
    job["spec"]["tfReplicaSpecs"] = specs
    return job


@settings(max_examples=60, deadline=None)
@given(st.one_of(_pytorch_jobs(), _mpi_jobs(), _tf_jobs()))
def test_generated_jobs_round_trip(wire: dict[str, Any]) -> None:
    assert load_job(wire).to_wire() == wire
