"""``kubetrain.local.train``'s checks of what it is given, made before any process starts
(the runs themselves are in tests/training/test_local_train.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.errors import JobValidationError
from kubetrain.local import LocalRunError, train
from tests.builders.trainer import UPSTREAM_TRAINER


@dataclasses.dataclass
class CustomTrainer:
    """The fields of the Kubeflow SDK's ``CustomTrainer`` (kubeflow 0.5.0), in its order."""

    func: Callable[..., Any]
    func_args: dict[str, Any] | None = None
    image: str | None = None
    packages_to_install: list[str] | None = None
    pip_index_urls: list[str] = dataclasses.field(default_factory=list)
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    env: dict[str, str] | None = None


def fit(lr: float, epochs: int = 1) -> None:
    print(lr, epochs)


def make_closure() -> Callable[[], None]:
    captured = 3

    def inner() -> None:
        print(captured)

    return inner


def test_rejects_a_lambda() -> None:
    with pytest.raises(TypeError, match="a lambda cannot be shipped"):
        train(lambda: None)


def test_rejects_a_closure_naming_what_it_captures() -> None:
    with pytest.raises(
        TypeError, match=r"inner uses variables of its enclosing function \(captured\)"
    ):
        train(make_closure())


def test_rejects_something_that_is_not_a_function() -> None:
    with pytest.raises(TypeError, match="takes a function defined with def"):
        train(print)


def test_rejects_func_args_that_do_not_fit_the_signature() -> None:
    with pytest.raises(
        TypeError,
        match=r"func_args \['epochs'\] do not fit fit\(lr.*missing a required argument: 'lr'",
    ):
        train(fit, func_args={"epochs": 2})
    with pytest.raises(TypeError, match="keys must be argument names"):
        train(fit, func_args={"lr": 1, "not a name": 2})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_nodes": 0}, "num_nodes must be an integer of at least 1, got 0"),
        (
            {"num_proc_per_node": True},
            "num_proc_per_node must be an integer of at least 1, got True",
        ),
        ({"num_nodes": 2.0}, "num_nodes must be an integer of at least 1, got 2.0"),
    ],
    ids=["zero-nodes", "bool-procs", "float-nodes"],
)
def test_rejects_bad_counts(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        train(fit, func_args={"lr": 1.0}, **options)


def test_rejects_env_values_that_are_not_text() -> None:
    with pytest.raises(TypeError, match=r"env must map names to strings, got \{'N': 1\}"):
        train(fit, func_args={"lr": 1.0}, env={"N": 1})  # type: ignore[dict-item]


def test_rejects_a_setting_given_twice() -> None:
    trainer = CustomTrainer(func=fit, func_args={"lr": 1.0}, num_nodes=3)
    with pytest.raises(ValueError, match=r"num_nodes is given twice.*\(2\).*\(3\)"):
        train(trainer, num_nodes=2)


def test_rejects_a_runtime_that_is_not_torch() -> None:
    runtime = UPSTREAM_TRAINER / "manifests" / "base" / "runtimes" / "jax_distributed.yaml"
    with pytest.raises(
        LocalRunError, match="has mlPolicy jax; train\\(\\) runs the function under"
    ):
        train(fit, func_args={"lr": 1.0}, runtime=runtime)


def test_rejects_a_variable_the_framework_injects(tmp_path: Path) -> None:
    # The TrainJob's own rule (and upstream's webhook): PET_* belong to torchrun.
    with pytest.raises(JobValidationError, match="PET_NNODES"):
        train(fit, func_args={"lr": 1.0}, env={"PET_NNODES": "9"}, run_dir=tmp_path)


def test_warns_that_packages_are_not_installed(tmp_path: Path) -> None:
    trainer = CustomTrainer(func=fit, func_args={"lr": 1.0}, packages_to_install=["transformers"])
    # Stop before any process starts: a reserved variable fails the TrainJob's checks.
    trainer.env = {"PET_NNODES": "1"}
    with (
        pytest.warns(UserWarning, match=r"packages_to_install \(transformers\) are not installed"),
        pytest.raises(JobValidationError),
    ):
        train(trainer, run_dir=tmp_path)
