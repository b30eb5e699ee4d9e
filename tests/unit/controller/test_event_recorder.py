"""What the EventRecorder keeps while an Event waits for its turn: the involved object's
reference, not the job (a 1,000-job burst queues thousands of Events, and each used to
hold an old version of its whole job)."""

from __future__ import annotations

import gc
from typing import Any

from kubetrain.controller.decisions import Event
from kubetrain.controller.events import EventRecorder


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "bert",
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "42",
            "labels": {"a": "b"},
        },
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {}}}},
        "status": {"conditions": []},
    }


def test_a_queued_event_holds_only_the_reference() -> None:
    recorder = EventRecorder(api=None, identity="op-1", may_write=lambda: True)  # type: ignore[arg-type]
    job = _job()
    spec = job["spec"]
    recorder.emit(job, Event("Normal", "SuccessfulCreatePod", "Created pod: bert-master-0"))
    involved, event = recorder._events.get_nowait()  # type: ignore[misc]
    assert involved == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "bert",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    del job
    gc.collect()
    # Nothing but this test refers to the job's spec any more.
    assert [r for r in gc.get_referrers(spec) if r is not locals()] == []
    recorder._events.put((involved, event))
    sent = recorder._object(*recorder._events.get_nowait())  # type: ignore[misc]
    assert sent["involvedObject"] == involved
    assert sent["metadata"]["namespace"] == "team-a"
    assert sent["metadata"]["name"].startswith("bert.")
    assert sent["reason"] == "SuccessfulCreatePod"
    assert sent["reportingInstance"] == "op-1"


def test_a_job_without_a_namespace_gets_its_event_in_default() -> None:
    recorder = EventRecorder(api=None, identity="op-1", may_write=lambda: True)  # type: ignore[arg-type]
    job = _job()
    del job["metadata"]["namespace"]
    recorder.emit(job, Event("Warning", "Invalid", "bad spec", name="invalid"))
    sent = recorder._object(*recorder._events.get_nowait())  # type: ignore[misc]
    assert sent["metadata"] == {"name": "bert.invalid", "namespace": "default"}
    assert sent["involvedObject"]["namespace"] == "default"
