"""``kubetrain.local.train``: functions run as real torchrun processes (gloo, CPU),
N nodes x M processes on this machine."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local import LocalTrainError, train
from tests.integration.sdk import run_sdk
from tests.training.local_functions import (
    ddp_train,
    fail_on_rank,
    keywords_only,
    raises,
    report_environment,
    shell_text,
)
from tests.training.test_local_run import pid_alive


@dataclasses.dataclass
class CustomTrainer:
    """The fields of the Kubeflow SDK's ``CustomTrainer`` (kubeflow 0.5.0), in its order;
    test_the_sdks_own_custom_trainer runs the real class."""

    func: Callable[..., Any]
    func_args: dict[str, Any] | None = None
    image: str | None = None
    packages_to_install: list[str] | None = None
    pip_index_urls: list[str] = dataclasses.field(default_factory=list)
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    env: dict[str, str] | None = None


# --- tests -------------------------------------------------------------------------------


def test_two_nodes_of_two_processes_train_ddp_to_identical_parameters(tmp_path: Path) -> None:
    out = io.StringIO()
    result = train(
        ddp_train,
        num_nodes=2,
        num_proc_per_node=2,
        func_args={"out_dir": str(tmp_path)},
        run_dir=tmp_path / "run",
        out=out,
    )
    assert result.phase == "Complete", out.getvalue()
    reports = {
        int(path.stem.removeprefix("rank-")): json.loads(path.read_text())
        for path in tmp_path.glob("rank-*.json")
    }
    assert sorted(reports) == [0, 1, 2, 3], out.getvalue()
    assert {r["world_size"] for r in reports.values()} == {4}
    placement = {rank: (r["node_rank"], r["local_rank"]) for rank, r in reports.items()}
    assert placement == {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}
    digests = {r["digest"] for r in reports.values()}
    assert len(digests) == 1, f"ranks ended with different parameters: {reports}"
    assert [(r.rank, r.node_rank, r.local_rank, r.exit_code) for r in result.ranks] == [
        (0, 0, 0, 0),
        (1, 0, 1, 0),
        (2, 1, 0, 0),
        (3, 1, 1, 0),
    ]
    assert result.nodes == {"node-0": 0, "node-1": 0}
    assert all(r.seconds is not None and r.log.exists() for r in result.ranks)


def test_the_source_travels_verbatim_without_shell_expansion(tmp_path: Path) -> None:
    out = io.StringIO()
    result = train(shell_text, num_nodes=1, num_proc_per_node=1, run_dir=tmp_path, out=out)
    literal = "home=$HOME tick=`whoami` sub=$(id -u) backslash=\\n"
    assert f"[node-0] [rank0]:{literal}" in out.getvalue(), out.getvalue()
    assert result.ranks[0].log.read_text() == literal + "\n"


def test_func_args_arrive_as_keyword_arguments(tmp_path: Path) -> None:
    out = io.StringIO()
    train(
        keywords_only,
        num_nodes=1,
        num_proc_per_node=1,
        func_args={"lr": 0.25, "name": 'it\'s "quoted"', "sizes": [1, 2]},
        run_dir=tmp_path,
        out=out,
    )
    assert "[rank0]:lr=0.25 name='it\\'s \"quoted\"' sizes=[1, 2]" in out.getvalue()


def test_a_failing_rank_raises_with_its_exit_code_and_log_tail(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    with pytest.raises(LocalTrainError) as raised:
        train(
            fail_on_rank,
            num_nodes=2,
            num_proc_per_node=2,
            func_args={"bad_rank": 2, "code": 7, "pid_dir": str(pids)},
            run_dir=tmp_path / "run",
            out=io.StringIO(),
        )
    error = raised.value
    assert (error.rank, error.exit_code) == (2, 7)
    assert error.log_tail.splitlines() == ["rank 2 started", "rank 2 gives up"]
    assert "rank 2 (node 1, local rank 0) exited with code 7" in str(error)
    assert error.result.phase == "Failed"
    left = [p.name for p in sorted(pids.iterdir()) if pid_alive(int(p.read_text()))]
    assert left == [], f"ranks left running after the failure: {left}"


def test_an_exception_is_exit_code_1_with_its_traceback(tmp_path: Path) -> None:
    with pytest.raises(LocalTrainError) as raised:
        train(raises, num_nodes=1, num_proc_per_node=1, run_dir=tmp_path, out=io.StringIO())
    assert (raised.value.rank, raised.value.exit_code) == (0, 1)
    assert raised.value.log_tail.splitlines()[-1] == "ValueError: the data set is empty"


def test_a_custom_trainer_runs_with_the_inherited_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_TEST_INHERITED", "yes")
    trainer = CustomTrainer(
        func=report_environment, func_args={"label": "seen"}, num_nodes=2, env={"GREETING": "hi"}
    )
    out = io.StringIO()
    result = train(trainer, num_proc_per_node=1, run_dir=tmp_path, out=out)
    assert [r.rank for r in result.ranks] == [0, 1]
    seen = [
        json.loads(line.split("]:seen ", 1)[1])
        for line in out.getvalue().splitlines()
        if "]:seen " in line
    ]
    assert sorted(s["RANK"] for s in seen) == ["0", "1"], out.getvalue()
    for values in seen:
        assert values["GREETING"] == "hi" and values["KUBETRAIN_TEST_INHERITED"] == "yes"
        assert values["PET_NNODES"] == "2" and values["PET_NPROC_PER_NODE"] == "1"
        assert values["python"] == sys.executable


def test_the_sdks_own_custom_trainer(tmp_path: Path) -> None:
    # kubeflow 0.5.0's CustomTrainer, made in the SDK's virtualenv and handed to
    # kubetrain.local.train there; the ranks run with this interpreter (it has torch).
    report = run_sdk(
        "local_train",
        "--python",
        sys.executable,
        "--out-dir",
        str(tmp_path),
        timeout=600,
    )
    assert report["trainer_class"] == "kubeflow.trainer.types.types.CustomTrainer", report
    assert report["phase"] == "Complete"
    assert report["ranks"] == [[0, 0], [1, 0], [2, 0], [3, 0]]
    digests = {json.loads(p.read_text())["digest"] for p in tmp_path.glob("rank-*.json")}
    assert len(list(tmp_path.glob("rank-*.json"))) == 4 and len(digests) == 1
