"""JAX's policy declaration (its environment's values: ``test_trainjob_env``)."""

from __future__ import annotations

from kubetrain.api.trainer import constants as T
from kubetrain.frameworks import ClusterAddressing, jax
from kubetrain.frameworks.policy import RENDEZVOUS_PORT
from tests.unit.frameworks.test_trainjob_env import job


def test_policy_serves_the_coordinator_port_and_reserves_nothing() -> None:
    assert jax.POLICY.name == "jax"
    assert jax.POLICY.rank_port == RENDEZVOUS_PORT
    assert jax.POLICY.reserved_env == ()


def test_env_names_are_the_modules_constants() -> None:
    resolved = job({"jax": {}}, numNodes=2)
    env = jax.POLICY.container_env(resolved, "node", T.NODE, 0, ClusterAddressing())
    assert [var["name"] for var in env] == [
        jax.JAX_NUM_PROCESSES,
        jax.JAX_PROCESS_ID,
        jax.JAX_COORDINATOR_ADDRESS,
    ]


def test_rejects_containers_but_the_trainers_node() -> None:
    resolved = job({"jax": {}}, numNodes=2)
    assert jax.POLICY.container_env(resolved, "node", "sidecar", 0, ClusterAddressing()) == []
