"""``kubetrain run --local`` of upstream's XGBoostJob example (training-operator v1.9.0,
``examples/xgboost/xgboostjob.yaml``: a Master and two Workers) with real XGBoost
(``xgboost-cpu``, installed by ``make test``). Its image's program uses the Rabit API
XGBoost has since removed, so the replicas run a small program of today's API instead,
configured only by the environment upstream's controller injects: the Master starts the
tracker on ``MASTER_ADDR:MASTER_PORT``, every replica joins it with its ``RANK`` out of
``WORLD_SIZE`` and they train one model together (histograms all-reduced), which ends the
same on every rank. Upstream's smoke test example (its Master's and Workers' pods alike),
converted to a TrainJob (``kubetrain convert --to trainjob``) on upstream Trainer's
``xgboost-distributed`` runtime, trains the same way."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.training.helpers import REPO_ROOT, kubetrain, load_manifest, with_command, write_manifest

UPSTREAM = REPO_ROOT / "tests/data/upstream"
EXAMPLE = UPSTREAM / "training-operator-v1.9.0/xgboost/xgboostjob.yaml"
SMOKE = UPSTREAM / "training-operator-v1.9.0/xgboost/smoke-dist/xgboostjob_v1_rabit_test.yaml"
RUNTIME = UPSTREAM / "trainer-v2.3.0/manifests/base/runtimes/xgboost_distributed.yaml"
#: The XGBoostJob's variables from the TrainJob's DMLC ones (the report's note names both),
#: for a program written for the XGBoostJob.
AS_AN_XGBOOSTJOB = (
    'export MASTER_ADDR="$DMLC_TRACKER_URI" MASTER_PORT="$DMLC_TRACKER_PORT" '
    'RANK="$DMLC_TASK_ID" WORLD_SIZE="$DMLC_NUM_WORKER"; exec "$@"'
)

TRAIN = """
import hashlib, os
import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
tracker = None
if rank == 0:
    tracker = RabitTracker(n_workers=world, host_ip=host, port=port, sortby="task")
    tracker.start()
args = {"dmlc_tracker_uri": host, "dmlc_tracker_port": port, "dmlc_task_id": str(rank)}
with collective.CommunicatorContext(**args):
    # Each rank holds its own rows: only the all-reduce makes the models equal.
    rng = np.random.default_rng(rank)
    x = rng.normal(size=(256, 4))
    y = x @ np.array([1.0, 2.0, 3.0, 4.0]) + rng.normal(size=256) * 0.1
    params = {"tree_method": "hist", "max_depth": 3}
    booster = xgb.train(params, xgb.DMatrix(x, y), num_boost_round=8)
    digest = hashlib.sha256(booster.save_raw("json")).hexdigest()[:16]
    print(f"rank {collective.get_rank()} of {collective.get_world_size()} model {digest}")
if tracker is not None:
    tracker.wait_for()
"""


def test_master_and_workers_train_one_model_with_real_xgboost(tmp_path: Path) -> None:
    job = with_command(load_manifest(EXAMPLE), [sys.executable, "-c", TRAIN])
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "xgb.yaml")))
    assert result.returncode == 0, result.output
    found = re.findall(r"^\[([a-z]+-\d)\] rank (\d) of 3 model (\w+)$", result.output, re.M)
    # RANK: the Master 0, Worker i is i + 1, as upstream's controller numbers them.
    ranks = sorted((replica, rank) for replica, rank, _ in found)
    assert ranks == [("master-0", "0"), ("worker-0", "1"), ("worker-1", "2")], result.output
    # Trained on different rows, one model: the same bytes on every rank.
    assert len({digest for _, _, digest in found}) == 1, result.output
    assert "XGBoostJob/xgboost-dist-iris-test-train Succeeded" in result.output
    assert "xgboost-dist-iris-test-train-master-0 completed" in result.output


def test_a_failed_master_fails_the_local_run(tmp_path: Path) -> None:
    program = 'import os, sys\nsys.exit(3 if os.environ["RANK"] == "0" else 0)\n'
    job = with_command(load_manifest(EXAMPLE), [sys.executable, "-c", program])
    result = kubetrain("run", "--local", str(write_manifest(job, tmp_path / "xgb.yaml")))
    assert result.returncode == 3, result.output
    assert "XGBoostJob/xgboost-dist-iris-test-train Failed" in result.output


def test_the_smoke_example_converted_to_a_trainjob_trains_one_model(tmp_path: Path) -> None:
    converted = tmp_path / "converted"
    result = kubetrain("convert", "--to", "trainjob", str(SMOKE), "-o", str(converted))
    # Exit 1: imagePullPolicy, the ports and the restart policies have no place in a TrainJob.
    assert result.returncode == 1, result.output
    assert 'decide: kind ("XGBoostJob"): the program reads DMLC_TRACKER_URI' in result.output
    trainjob = load_manifest(converted / SMOKE.name)
    assert trainjob["spec"]["trainer"]["numNodes"] == 3
    program = ["sh", "-c", AS_AN_XGBOOSTJOB, "sh", sys.executable, "-c", TRAIN]
    trainjob["spec"]["trainer"]["command"] = program
    manifest = write_manifest(trainjob, tmp_path / "trainjob.yaml")
    result = kubetrain("run", "--local", str(manifest), "--runtime", str(RUNTIME))
    assert result.returncode == 0, result.output
    found = re.findall(r"^\[node-(\d)\] rank (\d) of 3 model (\w+)$", result.output, re.M)
    # Node i is rank i: node 0 plays the Master, whose program starts the tracker.
    assert sorted((node, rank) for node, rank, _ in found) == [("0", "0"), ("1", "1"), ("2", "2")]
    assert len({digest for _, _, digest in found}) == 1, result.output
    assert "TrainJob/xgboost-dist-test Complete" in result.output
