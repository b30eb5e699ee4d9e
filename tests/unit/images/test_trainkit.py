"""The learning-rate schedule and helpers the sample training programs share."""

from __future__ import annotations

import argparse

import pytest

from images.common import trainkit
from images.common.trainkit import (
    FINAL_LINE,
    STEP_LINE,
    LearningRateSchedule,
    add_common_arguments,
    data_seed,
    validate_common_arguments,
)
from kubetrain.api import env_names


def test_linear_scaling_rule_scales_with_the_global_batch() -> None:
    schedule = LearningRateSchedule(base_lr=0.1, base_batch_size=256, global_batch_size=8192)
    assert schedule.peak_lr == pytest.approx(3.2)
    assert schedule.lr_at(1) == pytest.approx(3.2)  # no warmup


def test_warmup_rises_linearly_from_base_to_peak() -> None:
    schedule = LearningRateSchedule(
        base_lr=0.1, base_batch_size=32, global_batch_size=128, warmup_steps=4
    )
    assert [schedule.lr_at(step) for step in (1, 2, 3, 4, 5, 100)] == pytest.approx(
        [0.175, 0.25, 0.325, 0.4, 0.4, 0.4]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_lr": 0.0}, r"base_lr \(0.0\) must be > 0"),
        ({"base_batch_size": 0}, r"base_batch_size \(0\) must be > 0"),
        ({"global_batch_size": -1}, r"global_batch_size \(-1\) must be > 0"),
        ({"warmup_steps": -2}, r"warmup_steps \(-2\) must be >= 0"),
    ],
    ids=["lr", "base-batch", "global-batch", "warmup"],
)
def test_rejects_invalid_schedule(kwargs: dict[str, float], message: str) -> None:
    values: dict[str, float] = {"base_lr": 0.1, "base_batch_size": 32, "global_batch_size": 64}
    values.update(kwargs)
    with pytest.raises(ValueError, match=message):
        LearningRateSchedule(**values)  # type: ignore[arg-type]


def test_rejects_step_zero() -> None:
    schedule = LearningRateSchedule(base_lr=0.1, base_batch_size=32, global_batch_size=32)
    with pytest.raises(ValueError, match=r"step \(0\) must be >= 1"):
        schedule.lr_at(0)


def test_rejects_non_positive_steps_option() -> None:
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    with pytest.raises(SystemExit, match=r"--batch-size \(0\) must be >= 1"):
        validate_common_arguments(parser.parse_args(["--batch-size", "0"]))


def test_data_seed_differs_per_rank_and_step_and_is_stable() -> None:
    seeds = {data_seed(7, rank, step) for rank in range(4) for step in range(1, 50)}
    assert len(seeds) == 4 * 49
    assert data_seed(7, 1, 3) == data_seed(7, 1, 3)


def test_log_line_patterns() -> None:
    step = STEP_LINE.match("step=12 loss=0.8123 lr=0.100000 samples_per_sec=2210.4")
    assert step is not None and step["step"] == "12" and float(step["loss"]) == 0.8123
    final = FINAL_LINE.match(f"final rank=1 step=40 params_sha256={'a' * 64}")
    assert final is not None and final["rank"] == "1"


def test_the_restart_note_reads_the_names_the_operator_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (trainkit.RESTART_ATTEMPT_ENV, trainkit.RESTART_REASON_ENV) == (
        env_names.RESTART_ATTEMPT,
        env_names.RESTART_REASON,
    )
    monkeypatch.delenv(env_names.RESTART_ATTEMPT, raising=False)
    assert trainkit.attempt_note() == ""
    monkeypatch.setenv(env_names.RESTART_ATTEMPT, "2")
    monkeypatch.setenv(env_names.RESTART_REASON, "EvictionByEvictionAPI")
    assert trainkit.attempt_note() == " attempt=2 reason=EvictionByEvictionAPI"
