"""The frame the replicated frameworks share (``kubetrain.frameworks.base``)."""

from __future__ import annotations

import pytest

from kubetrain.api.jax import INFO as JAX
from kubetrain.api.jax import JAXJob
from kubetrain.api.loader import load_job
from kubetrain.frameworks import jax, paddle, pytorch, xgboost
from kubetrain.frameworks.base import WholeEnvFramework, typed_as
from tests.builders.jobs import jax_job, pytorch_job


def test_a_framework_without_its_environment_cannot_be_made() -> None:
    class NoEnv(WholeEnvFramework[JAXJob]):
        info = JAX
        model = JAXJob
        name = "JAX"

    with pytest.raises(TypeError, match="replica_env"):
        NoEnv()  # type: ignore[abstract]


def test_the_shared_frame_serves_each_whole_env_framework() -> None:
    job = load_job(jax_job())
    for framework in (jax.FRAMEWORK, paddle.FRAMEWORK, pytorch.FRAMEWORK, xgboost.FRAMEWORK):
        assert isinstance(framework, WholeEnvFramework)
        main = framework.info.main_container
        assert main is not None and framework.run_container(job, "Worker") == main


def test_typed_as_names_the_framework_and_the_kind_it_got() -> None:
    job = load_job(pytorch_job())
    with pytest.raises(
        TypeError, match="the JAX framework takes only JAXJobs \\(got PyTorchJob\\)"
    ):
        typed_as(job, JAXJob, "JAX")
