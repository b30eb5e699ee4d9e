"""XGBoost's policy declaration (its environment's values: ``test_trainjob_env``)."""

from __future__ import annotations

from kubetrain.api.trainer import constants as T
from kubetrain.frameworks import ClusterAddressing, xgboost
from kubetrain.frameworks.policy import RENDEZVOUS_PORT
from tests.unit.frameworks.test_trainjob_env import job


def test_policy_serves_the_tracker_port_and_reserves_its_env() -> None:
    assert xgboost.POLICY.name == "xgboost"
    assert xgboost.POLICY.rank_port == RENDEZVOUS_PORT
    resolved = job({"xgboost": {}}, numNodes=2)
    env = xgboost.POLICY.container_env(resolved, "node", T.NODE, 1, ClusterAddressing())
    assert tuple(var["name"] for var in env) == xgboost.POLICY.reserved_env


def test_workers_are_one_per_gpu() -> None:
    limits = {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}
    assert xgboost.workers(job({"xgboost": {}}, numNodes=3, **limits)) == 12
    assert xgboost.workers(job({"xgboost": {}}, numNodes=3)) == 3


def test_rejects_containers_but_the_trainers_node() -> None:
    resolved = job({"xgboost": {}}, numNodes=2)
    assert xgboost.POLICY.container_env(resolved, "node", "sidecar", 0, ClusterAddressing()) == []
