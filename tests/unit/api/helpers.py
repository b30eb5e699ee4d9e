"""Small builders for job manifests used across the API tests."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.conftest import EXAMPLES


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return data


def pod(container: str = "pytorch", image: str = "trainer:1") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": container, "image": image}]}}


def pytorch_job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "job"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod()},
                "Worker": {"replicas": 2, "template": pod()},
            }
        },
    }
    base["spec"].update(copy.deepcopy(spec))
    return base


def tf_job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "job"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": pod("tensorflow")}}},
    }
    base["spec"].update(copy.deepcopy(spec))
    return base


def mpi_job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "job"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod("launcher")},
                "Worker": {"replicas": 2, "template": pod("worker")},
            }
        },
    }
    base["spec"].update(copy.deepcopy(spec))
    return base


def xgboost_job(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": "job"},
        "spec": {
            "xgbReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod("xgboost")},
                "Worker": {"replicas": 2, "template": pod("xgboost")},
            }
        },
    }
    base["spec"].update(copy.deepcopy(spec))
    return base


def set_path(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set a dotted path (``spec.x.y``; list indexes as ``[0]``) in a copy of ``obj``."""
    out = copy.deepcopy(obj)
    node: Any = out
    parts = path.replace("[", ".[").split(".")
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    last = parts[-1]
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value
    return out
