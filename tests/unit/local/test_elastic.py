"""The elastic scale plan of ``kubetrain run --local``: parsing, refusals, the rendezvous
settings of each node and the scaler's reading of the samples' lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubetrain.api.loader import load_job
from kubetrain.local.elastic import (
    ElasticGroup,
    ScaleAt,
    Scaler,
    check_scale_plan,
    parse_scale,
)
from kubetrain.local.plan import LocalRunError, plan_local_run


def _group(low: int = 1, high: int = 3, nodes: int = 2, restarts: int | None = 3) -> ElasticGroup:
    return ElasticGroup(
        replica_type="Worker", low=low, high=high, nodes=nodes, max_restarts=restarts,
        rescale=lambda n: [],
    )  # fmt: skip


def _elastic_job(**policy: object) -> dict[str, object]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "el"},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, **policy},
            "nprocPerNode": "1",
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [{"name": "pytorch", "image": "i", "command": ["t"]}]
                        }
                    },
                }
            },
        },
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3@step=20", ScaleAt(nodes=3, step=20)),
        ("2@45s", ScaleAt(nodes=2, seconds=45.0)),
        ("2@1.5", ScaleAt(nodes=2, seconds=1.5)),
    ],
    ids=["step", "seconds", "bare-seconds"],
)
def test_parses_scale_entries(text: str, expected: ScaleAt) -> None:
    assert parse_scale(text) == expected


@pytest.mark.parametrize("text", ["3", "x@step=2", "3@step=", "3@soon"])
def test_rejects_malformed_scale_entries(text: str) -> None:
    with pytest.raises(LocalRunError, match="is not NODES@step=STEP or NODES@SECONDS"):
        parse_scale(text)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["5@step=2"], "5 nodes is outside the job's elastic bounds 1..3"),
        (["2@step=2"], "the job already has 2 nodes then"),
        (["3@step=9", "2@step=4"], "step 4 must come after step 9"),
        (["3@9s", "2@4s"], "4s must come after 9s"),
    ],
    ids=["outside-bounds", "no-change", "steps-backwards", "seconds-backwards"],
)
def test_rejects_plans_the_job_cannot_follow(entries: list[str], message: str) -> None:
    with pytest.raises(LocalRunError, match=message):
        check_scale_plan([parse_scale(e) for e in entries], _group(), "PyTorchJob/el")


def test_rejects_more_removals_than_torchrun_restarts() -> None:
    plan = [parse_scale(e) for e in ("1@step=2", "2@step=4", "1@step=6")]
    with pytest.raises(LocalRunError, match=r"removes nodes 2 times .* only 1 times"):
        check_scale_plan(plan, _group(restarts=1), "PyTorchJob/el")


def test_rejects_a_plan_for_a_job_that_is_not_elastic() -> None:
    with pytest.raises(LocalRunError, match="--scale needs an elastic job: PyTorchJob/el"):
        check_scale_plan([parse_scale("3@step=2")], None, "PyTorchJob/el")


def test_node_zero_hosts_the_store_and_a_scaled_job_keeps_its_rendezvous(tmp_path: Path) -> None:
    plan = plan_local_run(load_job(_elastic_job()), scratch=tmp_path)
    assert plan.elastic is not None
    assert (plan.elastic.low, plan.elastic.high, plan.elastic.nodes) == (1, 3, 2)
    confs = [r.env["PET_RDZV_CONF"] for r in plan.replicas]
    assert confs == ["is_host=1", "is_host=0"]
    assert all(r.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1" for r in plan.replicas)
    # The samples resume from the run's own directory.
    assert {r.env["CHECKPOINT_DIR"] for r in plan.replicas} == {str(tmp_path / "checkpoints")}
    scaled = plan.elastic.rescale(3)
    assert [r.label for r in scaled] == ["worker-0", "worker-1", "worker-2"]
    endpoint = plan.replicas[0].env["PET_RDZV_ENDPOINT"]
    assert {r.env["PET_RDZV_ENDPOINT"] for r in scaled} == {endpoint}
    assert scaled[2].env["PET_NNODES"] == "1:3"
    assert scaled[2].env["PET_RDZV_CONF"] == "is_host=0"


def test_refuses_a_rendezvous_host_elsewhere(tmp_path: Path) -> None:
    job = load_job(_elastic_job(rdzvHost="trainer.example"))
    with pytest.raises(LocalRunError, match=re.escape("PET_RDZV_ENDPOINT is 'trainer.example:")):
        plan_local_run(job, scratch=tmp_path)


def test_scaler_waits_for_the_step_then_measures_the_reformed_group() -> None:
    scaler = Scaler(_group(), [ScaleAt(nodes=3, step=5), ScaleAt(nodes=2, step=8)], "1", 0.0)
    scaler.observe("step=4 loss=1.0 lr=0.1 samples_per_sec=1.0", 1.0)
    assert scaler.due(1.0) is None
    scaler.observe("[rank0]:step=5 loss=1.0 lr=0.1 samples_per_sec=1.0", 2.0)
    assert scaler.due(2.0) == ScaleAt(nodes=3, step=5)
    # The old group's steps do not count for the next entry, nor as re-formed.
    assert scaler.observe("step=9 loss=1.0 lr=0.1 samples_per_sec=1.0", 3.0) is None
    assert scaler.due(3.0) is None
    scaler.observe("training: world_size=3 batch_size=32", 6.0)
    scaler.observe("resume step=7 world_size=3 peak_lr=0.15 restart=0", 6.0)
    reformed = scaler.observe("step=8 loss=1.0 lr=0.1 samples_per_sec=1.0", 7.5)
    assert reformed is not None
    assert (reformed.reformed_after, reformed.resumed_step) == (5.5, 7)
    assert scaler.due(7.5) == ScaleAt(nodes=2, step=8)
