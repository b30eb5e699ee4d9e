"""What the operator writes is in its cache at once, on a real API server, also in a
namespace where its informers hold nothing yet.

The next reconcile of a job must see the children the previous one created, whether or
not their watch events have arrived: otherwise it creates them again (a 409 and a GET
per child) and records their creation twice. An informer with no object is falsy (it
has a length), and the cache looked the namespace's informer up with ``or``: in a fresh
namespace every write-through was dropped until the first watch event filled it. The
peer benchmark's audit log showed the symptom (two creates and a GET per worker pod of
some MPIJobs in a small burst)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from kubetrain.api import keys as K
from kubetrain.controller.cluster_state import KubeCluster
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.plugins.registry import build_registry
from tests.integration.kube import wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, mpi_job, pytorch_job

#: The pod names an Event's "pod: <name>" or "<n> pods: <a>, <b>" part lists.
POD_NAMES = re.compile(r"\bpods?: ([^;.]+)")


def _worker_pod(namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-worker-0",
            "namespace": namespace,
            "labels": K.job_labels("MPIJob", meta["name"]),
            "ownerReferences": [
                {
                    "apiVersion": job["apiVersion"],
                    "kind": "MPIJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "mpi", "image": "busybox:1.36"}]},
    }


def test_a_child_created_in_an_empty_namespace_is_in_the_cache_at_once(
    installed_crds: list[dict[str, Any]], kubeconfig: Path, namespace: str, jobs: Jobs
) -> None:
    job = jobs.create(mpi_job("wt"))
    api = KubeApi.connect(str(kubeconfig))
    plugins = build_registry(("MPIJob",))
    # Informers not started: no watch event can fill the cache; only the write can.
    cluster = KubeCluster(
        api, {"MPIJob": plugins["MPIJob"].child_kinds}, (namespace,), lambda _key: None
    )
    key = ("MPIJob", namespace, "wt")
    pod = _worker_pod(namespace, job)
    try:
        created = cluster.create(pod)
        observed = cluster.observed(key, job["metadata"]["uid"], datetime.now(UTC))
        assert list(observed.pods) == ["wt-worker-0"]
        assert created is True
        # A create that finds its own child (a cache that had not shown it) is not a
        # creation: the reconciler records no second SuccessfulCreatePod for it.
        assert cluster.create(pod) is False
    finally:
        api.close()


def test_each_child_is_created_and_announced_once(
    operator: RunningOperator, jobs: Jobs, core_v1: client.CoreV1Api, namespace: str
) -> None:
    # A fresh namespace, so the operator's pod informer is empty when the burst starts.
    names = [f"mpi-{i}" for i in range(3)] + [f"pt-{i}" for i in range(3)]
    for name in names:
        jobs.create(mpi_job(name) if name.startswith("mpi") else pytorch_job(name, workers=2))
    expected = {f"mpi-{i}-worker-{w}" for i in range(3) for w in range(2)} | {
        f"pt-{i}-{role}" for i in range(3) for role in ("master-0", "worker-0", "worker-1")
    }

    def announced() -> list[str]:
        # The job's Created Event names what its first reconcile created ("... Created
        # service: s; 2 pods: a, b; job: l."), a later one's SuccessfulCreatePod the rest
        # ("Created pod: <name>" or "Created 2 pods: <a>, <b>").
        events = core_v1.list_namespaced_event(namespace).items
        return [
            name
            for e in events
            if e.reason in ("SuccessfulCreatePod", "MPIJobCreated", "PyTorchJobCreated")
            for found in POD_NAMES.findall(str(e.message))
            for name in found.split(", ")
        ]

    wait_for(
        announced,
        lambda found: set(found) >= expected,
        what=f"the creation of each of {len(expected)} pods announced",
    )
    time.sleep(2)  # an Event sent twice would be queued right behind the first
    seen = announced()
    assert sorted(seen) == sorted(expected), "a pod's creation was recorded twice"
