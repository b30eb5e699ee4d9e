"""The ML policy registry: every registered policy is complete and consistent with the API's
tables, and a policy's name appears only in its module and the registry (plus a short,
explained allow-list)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.api.trainer import constants as T
from kubetrain.api.trainer.resolve import TENSORFLOW, ResolvedTrainJob
from kubetrain.api.trainer.runtime import ML_POLICY_SOURCES
from kubetrain.frameworks import ClusterAddressing, registry
from kubetrain.frameworks.policy import TrainJobPolicy
from tests.unit.frameworks.test_trainjob_env import job, mpi_job

PACKAGE = Path(registry.__file__).resolve().parent.parent
CLUSTER = ClusterAddressing()

#: Modules that name a policy besides its own module and the registry, and why.
ALLOWED = {
    "api/trainer/runtime.py": "the mlPolicy model: its fields are the policies' wire names",
    "api/convert/trainjob.py": "upstream's shipped runtimes (jax-distributed...) by policy",
    "constructs/runtimes.py": "the public runtime constructs (JaxRuntime, XGBoostRuntime)",
    "constructs/__init__.py": "re-exports those constructs",
}


def resolved(policy: TrainJobPolicy) -> ResolvedTrainJob:
    """A two-node TrainJob on a runtime of ``policy``."""
    if policy.name == TENSORFLOW:
        return job({"numNodes": 2})
    if policy.name == "mpi":
        return mpi_job({"numNodes": 2, "mpi": {}})
    return job({policy.name: {}}, numNodes=2)


def test_names_are_unique() -> None:
    names = [policy.name for policy in registry.POLICIES]
    assert len(names) == len(set(names)) and set(names) == set(registry.BY_NAME)


FLUX = "flux"


def test_every_policy_source_but_flux_is_registered() -> None:
    """kubetrain implements every ``mlPolicy`` source but Flux (resolve_trainjob refuses it) and
    adds TensorFlow, read from the runtime's framework label."""
    names = {policy.name for policy in registry.POLICIES}
    assert set(ML_POLICY_SOURCES) - names == {FLUX}
    assert names - set(ML_POLICY_SOURCES) == {TENSORFLOW}


def test_reserved_env_is_what_the_api_refuses() -> None:
    declared = tuple(name for policy in registry.POLICIES for name in policy.reserved_env)
    assert declared == T.ALL_RESERVED_ENV


@pytest.mark.parametrize("policy", registry.POLICIES, ids=lambda p: p.name)
def test_every_policy_injects_what_it_reserves(policy: TrainJobPolicy) -> None:
    names = {var["name"] for var in policy.env(resolved(policy), 1, CLUSTER)}
    assert names, f"{policy.name} injects nothing"
    assert set(policy.reserved_env) <= names


@pytest.mark.parametrize("policy", registry.POLICIES, ids=lambda p: p.name)
def test_every_policy_targets_the_node_container_only(policy: TrainJobPolicy) -> None:
    job_ = resolved(policy)
    targeted = [
        (rjob, container)
        for rjob in job_.spec.replicated_jobs
        for container in (T.NODE, "sidecar")
        if policy.targets(job_, rjob, container)
    ]
    assert targeted and all(container == T.NODE for _, container in targeted)


def test_policy_for_an_unknown_or_missing_policy_is_none() -> None:
    assert registry.policy_for(None) is None
    assert registry.policy_for(FLUX) is None
    assert registry.policy_for("jax") is registry.BY_NAME["jax"]


def _modules_naming(word: str) -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if word in path.read_text().lower()
    }


@pytest.mark.parametrize("name", ["jax", "xgboost"])
def test_a_framework_is_named_only_in_its_modules_and_the_registries(name: str) -> None:
    """JAX and XGBoost are both a TrainJob policy and a v1 kind (JAXJob, XGBoostJob): their
    name is in the framework's module (the policy and the v1 rules), the kind's API module
    (row, model, rules), the kind's construct, the training environment's names (its
    variables), one line each of the three registries (policies, frameworks, the kinds
    table) and the public API's exports, besides the explained allow-list. (torch, mpi and
    tensorflow name more: their kinds came first and have samples and converters of their
    own.)"""
    outside = _modules_naming(name) - ALLOWED.keys()
    assert outside == {
        f"frameworks/{name}.py",
        f"api/{name}.py",
        "api/__init__.py",
        "frameworks/registry.py",
        "frameworks/__init__.py",
        "api/kinds.py",
        "api/env_names.py",
        f"constructs/{name}_job.py",
    }
