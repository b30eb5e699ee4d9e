"""TensorFlow's environment contract (TFJob's TF_CONFIG), for the operator and for local runs."""

from __future__ import annotations

import json
from typing import Any

from kubetrain.api import TFJob
from kubetrain.frameworks import ClusterAddressing, LocalAddressing, tensorflow
from tests.builders.jobs import as_dict, loaded, template

CLUSTER = ClusterAddressing()


def tf_job(spec: dict[str, Any]) -> TFJob:
    return loaded(TFJob, spec, "tf")


PS_AND_WORKERS = {
    "tfReplicaSpecs": {
        "PS": {"replicas": 1, "template": template("tensorflow")},
        "Worker": {"replicas": 2, "template": template("tensorflow")},
    }
}


def test_tf_config_for_the_operator() -> None:
    env = as_dict(tensorflow.replica_env(tf_job(PS_AND_WORKERS), "Worker", 1, CLUSTER))
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {
            "ps": ["tf-ps-0.ml.svc:2222"],
            "worker": ["tf-worker-0.ml.svc:2222", "tf-worker-1.ml.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }


def test_tf_config_with_a_cluster_domain_and_local_ports() -> None:
    job = tf_job(PS_AND_WORKERS)
    domain = tensorflow.cluster_spec(job, ClusterAddressing(cluster_domain="cluster.local"))
    assert domain["ps"] == ["tf-ps-0.ml.svc.cluster.local:2222"]
    local = LocalAddressing(ports={("PS", 0): 41000, ("Worker", 0): 41001, ("Worker", 1): 41002})
    assert tensorflow.cluster_spec(job, local) == {
        "ps": ["127.0.0.1:41000"],
        "worker": ["127.0.0.1:41001", "127.0.0.1:41002"],
    }


def test_tf_config_is_not_set_for_a_single_replica() -> None:
    job = tf_job(
        {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": template("tensorflow")}}}
    )
    assert tensorflow.replica_env(job, "Worker", 0, CLUSTER) == []


def test_tf_config_sparse_with_dynamic_workers() -> None:
    job = tf_job({**PS_AND_WORKERS, "enableDynamicWorker": True})
    config = tensorflow.tf_config(job, "Worker", 1, CLUSTER)
    assert config is not None
    assert config["cluster"] == {
        "ps": ["tf-ps-0.ml.svc:2222"],
        "worker": {"1": "tf-worker-1.ml.svc:2222"},
    }
