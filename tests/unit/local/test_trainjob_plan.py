"""Planning a TrainJob's local run (no process started): the nodes, their commands and the
environment each gets, against upstream Trainer v2.3.0's runtimes and small ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.errors import JobValidationError
from kubetrain.api.trainer import TrainJob, load_object_file, load_trainer_object
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.frameworks import ClusterAddressing
from kubetrain.frameworks import trainjob as trainjob_rules
from kubetrain.local import LocalPlan, LocalRunError, plan_trainjob
from tests.builders.trainer import UPSTREAM_TRAINER, initializer_rjob, rjob, runtime, trainjob

RUNTIMES = UPSTREAM_TRAINER / "manifests" / "base" / "runtimes"
SCRATCH = Path("/scratch")


def upstream(name: str) -> RuntimeBase:
    loaded = load_object_file(RUNTIMES / name)
    assert isinstance(loaded, RuntimeBase)
    return loaded


def load_job(obj: dict[str, Any]) -> TrainJob:
    loaded = load_trainer_object(obj)
    assert isinstance(loaded, TrainJob)
    return loaded


def load_runtime(obj: dict[str, Any]) -> RuntimeBase:
    loaded = load_trainer_object(obj)
    assert isinstance(loaded, RuntimeBase)
    return loaded


def plan(job: TrainJob, rt: RuntimeBase, **options: Any) -> LocalPlan:
    options.setdefault("ports", [41000 + i for i in range(8)])
    return plan_trainjob(job, rt, scratch=SCRATCH, **options)


def by_label(result: LocalPlan) -> dict[str, dict[str, str]]:
    return {r.label: r.env for r in result.replicas}


def torch_job(name: str = "tj", **trainer: Any) -> TrainJob:
    return load_job(trainjob(name, runtimeRef={"name": "torch-distributed"}, trainer=trainer))


def test_torch_nodes_get_torchruns_variables_with_a_local_rendezvous() -> None:
    job = torch_job(numNodes=3, numProcPerNode=2, command=["torchrun", "train.py", "--lr", "1"])
    result = plan(job, upstream("torch_distributed.yaml"))
    assert [r.label for r in result.replicas] == ["node-0", "node-1", "node-2"]
    assert all(r.argv == ["torchrun", "train.py", "--lr", "1"] for r in result.replicas)
    for index, env in enumerate(by_label(result).values()):
        assert env == {
            "JOB_COMPLETION_INDEX": str(index),
            "PET_NNODES": "3",
            "PET_NPROC_PER_NODE": "2",
            "PET_NODE_RANK": str(index),
            "PET_MASTER_ADDR": "127.0.0.1",
            "PET_MASTER_PORT": "41000",  # node 0's port, for every node
        }
    assert result.success_phase == "Complete" and result.absent == frozenset()


def test_the_environment_is_the_operators_with_local_addresses() -> None:
    # The same framework call the operator makes, with cluster addresses swapped for
    # 127.0.0.1 and node 0's port: nothing else differs.
    job = torch_job(numNodes=2, command=["torchrun", "t.py"])
    result = plan(job, upstream("torch_distributed.yaml"))
    resolved = result.job
    for replica in result.replicas:
        cluster = {
            # The pod's index, from its completion-index annotation, as the kubelet reads it.
            var["name"]: var["value"] if "value" in var else str(replica.index)
            for var in trainjob_rules.FRAMEWORK.container_env(
                resolved,
                "node",
                replica.index,
                {"name": "node"},
                ClusterAddressing(),
            )
        }
        local = dict(replica.env)
        # What the operator's pods read from their completion-index annotation.
        assert local.pop("JOB_COMPLETION_INDEX") == str(replica.index)
        assert local.pop("PET_MASTER_ADDR") == "127.0.0.1"
        assert local.pop("PET_MASTER_PORT") == "41000"
        assert cluster.pop("PET_MASTER_ADDR") == "tj-node-0-0.tj"
        assert cluster.pop("PET_MASTER_PORT") == "29500"
        assert local == cluster


def test_rank_prefixes_tell_torchrun_to_prefix_ranks_unless_the_user_chose() -> None:
    job = torch_job(numNodes=2, command=["torchrun", "t.py"])
    result = plan(job, upstream("torch_distributed.yaml"), rank_prefixes=True)
    env = by_label(result)["node-1"]
    assert env["PET_TEE"] == "3"
    assert env["PET_LOG_DIR"] == str(SCRATCH / "torchrun")
    assert env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"
    mine = plan(
        job, upstream("torch_distributed.yaml"), rank_prefixes=True, extra_env={"PET_TEE": "0"}
    )
    assert by_label(mine)["node-0"]["PET_TEE"] == "0"


def test_manifest_env_expands_and_reads_the_completion_index() -> None:
    env = [
        {"name": "WHERE", "value": "node-$(PET_NODE_RANK)"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "INDEX",
            "valueFrom": {
                "fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                }
            },
        },
    ]
    job = torch_job(numNodes=2, command=["sh", "-c", "echo $(INDEX) $(POD)"], env=env)
    result = plan(job, upstream("torch_distributed.yaml"))
    second = result.replicas[1]
    # $(PET_NODE_RANK) is injected after the container's own env, so it stays literal
    # (as the kubelet leaves it).
    assert second.env["WHERE"] == "node-$(PET_NODE_RANK)"
    assert second.env["POD"] == "tj-node-0-1" and second.env["INDEX"] == "1"
    assert second.argv == ["sh", "-c", "echo 1 tj-node-0-1"]


def test_jax_and_xgboost_nodes_get_their_variables() -> None:
    jax = load_job(
        trainjob(
            "jx",
            runtimeRef={"name": "jax-distributed"},
            trainer={"numNodes": 2, "command": ["python", "j.py"]},
        )
    )
    env = by_label(plan(jax, upstream("jax_distributed.yaml")))["node-1"]
    assert env == {
        "JOB_COMPLETION_INDEX": "1",
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": "1",
        "JAX_COORDINATOR_ADDRESS": "127.0.0.1:41000",
    }
    xgb = load_job(
        trainjob(
            "xg",
            runtimeRef={"name": "xgboost-distributed"},
            trainer={"numNodes": 3, "command": ["python", "x.py"]},
        )
    )
    env = by_label(plan(xgb, upstream("xgboost_distributed.yaml")))["node-2"]
    assert env == {
        "JOB_COMPLETION_INDEX": "2",
        "DMLC_TRACKER_URI": "127.0.0.1",
        "DMLC_TRACKER_PORT": "41000",
        "DMLC_TASK_ID": "2",
        "DMLC_NUM_WORKER": "3",
    }


def test_a_plain_runtime_gets_no_variables_but_the_completion_index() -> None:
    rt = runtime("ClusterTrainingRuntime", "plain", mlPolicy={"numNodes": 2})
    job = load_job(trainjob("pl", runtimeRef={"name": "plain"}, trainer={"command": ["true"]}))
    result = plan(job, load_runtime(rt))
    # No framework's variables; the Job controller's index, as every pod gets it.
    assert by_label(result) == {
        "node-0": {"JOB_COMPLETION_INDEX": "0"},
        "node-1": {"JOB_COMPLETION_INDEX": "1"},
    }


def test_mpi_runs_the_launcher_with_a_local_hostfile() -> None:
    job = load_job(
        trainjob(
            "ds",
            runtimeRef={"name": "deepspeed-distributed"},
            trainer={"numNodes": 3, "numProcPerNode": 2, "command": ["mpirun", "python", "d.py"]},
        )
    )
    result = plan(job, upstream("deepspeed_distributed.yaml"))
    assert [r.label for r in result.replicas] == ["launcher-0"]
    # runLauncherAsNode: the launcher and two node pods, 2 slots each, all on this machine.
    assert result.files == {SCRATCH / "hostfile": "localhost slots=6\n"}
    assert result.absent == {("node", 0), ("node", 1)}
    env = result.replicas[0].env
    assert env["OMPI_MCA_orte_default_hostfile"] == str(SCRATCH / "hostfile")
    assert env["OMPI_MCA_orte_set_default_slots"] == "2"
    assert any("only serve sshd" in note for note in result.notes)
    assert result.succeeded({("launcher", 0): 0}) is not None
    assert result.succeeded({("launcher", 0): 1}) is None


def initializer_runtime(command: list[str] | None) -> RuntimeBase:
    init = initializer_rjob()
    if command is not None:
        init["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = command
    node = rjob("node", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}])
    return load_runtime(runtime("TrainingRuntime", "with-init", rjobs=[init, node]))


def init_job() -> TrainJob:
    return load_job(
        trainjob(
            "it",
            runtimeRef={"name": "with-init", "kind": "TrainingRuntime"},
            initializer={"dataset": {"storageUri": "hf://org/set"}},
            trainer={"numNodes": 2, "command": ["python", "t.py"]},
        )
    )


def test_initializers_run_first_and_the_trainer_waits_for_them() -> None:
    result = plan(init_job(), initializer_runtime(["python", "-c", "print('fetch')"]))
    assert [r.label for r in result.replicas] == [
        "dataset-initializer-0",
        "node-0",
        "node-1",
    ]
    assert result.replicas[0].env == {"STORAGE_URI": "hf://org/set", "JOB_COMPLETION_INDEX": "0"}
    (order,) = result.framework.start_order(result.job)
    assert order.waiting == ("node",) and order.needed == (("dataset-initializer", 0),)
    assert order.until == "Complete"
    # JobSet's default success policy: every replicated job's pods.
    done = {("node", 0): 0, ("node", 1): 0}
    assert result.succeeded(done) is None
    assert result.succeeded({**done, ("dataset-initializer", 0): 0}) is not None


def test_an_initializer_without_a_command_is_skipped_and_counted_complete() -> None:
    result = plan(init_job(), initializer_runtime(None))
    assert [r.label for r in result.replicas] == ["node-0", "node-1"]
    assert result.absent == {("dataset-initializer", 0)}
    assert any("skipped here and counted as Complete" in note for note in result.notes)
    assert result.succeeded({("node", 0): 0, ("node", 1): 0}) is not None


def test_gpus_are_split_between_nodes() -> None:
    job = torch_job(
        numNodes=2,
        command=["torchrun", "t.py"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": 2}},
    )
    result = plan(job, upstream("torch_distributed.yaml"), gpus=["0", "1", "2", "3", "4"])
    env = by_label(result)
    assert env["node-0"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["node-1"]["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert env["node-0"]["PET_NPROC_PER_NODE"] == "auto"


def test_rejects_gpus_this_machine_lacks_when_torchrun_would_count_cpus() -> None:
    job = torch_job(
        numNodes=2,
        command=["torchrun", "t.py"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": 2}},
    )
    with pytest.raises(LocalRunError, match=r"asks for 2 node\(s\) x 2 GPU\(s\).*shows 1") as err:
        plan(job, upstream("torch_distributed.yaml"), gpus=["0"])
    assert "spec.trainer.numProcPerNode" in str(err.value)


def test_too_few_gpus_with_explicit_processes_is_a_note() -> None:
    job = torch_job(
        numNodes=2,
        numProcPerNode=2,
        command=["torchrun", "t.py"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": 2}},
    )
    result = plan(job, upstream("torch_distributed.yaml"), gpus=[])
    assert "CUDA_VISIBLE_DEVICES" not in by_label(result)["node-0"]
    assert any("shows 0" in note for note in result.notes)


def test_rejects_a_trainer_without_a_command() -> None:
    job = torch_job(numNodes=1)
    with pytest.raises(LocalRunError, match="has no command") as err:
        plan(job, upstream("torch_distributed.yaml"))
    assert "spec.trainer.command" in str(err.value) and "--entrypoint" in str(err.value)
    with_entrypoint = plan(job, upstream("torch_distributed.yaml"), entrypoint=["torchrun", "t.py"])
    assert with_entrypoint.replicas[0].argv == ["torchrun", "t.py"]


def test_rejects_a_suspended_trainjob() -> None:
    job = load_job(trainjob("sus", suspend=True, trainer={"command": ["true"]}))
    with pytest.raises(LocalRunError, match=r"spec\.suspend: true"):
        plan(job, upstream("torch_distributed.yaml"))


def test_rejects_a_runtime_the_trainjob_does_not_name() -> None:
    job = torch_job(command=["true"])
    with pytest.raises(
        LocalRunError,
        match="names ClusterTrainingRuntime torch-distributed, not "
        "ClusterTrainingRuntime jax-distributed",
    ):
        plan(job, upstream("jax_distributed.yaml"))


def test_rejects_a_pair_the_operator_cannot_resolve() -> None:
    rt = runtime("ClusterTrainingRuntime", "no-trainer", rjobs=[rjob("node", step=None)])
    job = load_job(trainjob("nt", runtimeRef={"name": "no-trainer"}, trainer={"command": ["true"]}))
    with pytest.raises(JobValidationError, match="trainjob-ancestor-step"):
        plan(job, load_runtime(rt))


def test_rejects_env_it_cannot_resolve() -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    job = torch_job(command=["true"], env=env)
    with pytest.raises(LocalRunError, match="env TOKEN uses valueFrom") as err:
        plan(job, upstream("torch_distributed.yaml"))
    assert "--env NAME=VALUE" in str(err.value)
