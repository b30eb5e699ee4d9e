"""What the EventRecorder keeps while an Event waits for its turn: the involved object's
reference, not the job (a 1,000-job burst queues thousands of Events, and each used to
hold an old version of its whole job)."""

from __future__ import annotations

import gc
import time
from typing import Any

from kubetrain.controller.decisions import Event
from kubetrain.controller.events import EventRecorder
from kubetrain.controller.ratelimit import TokenBucket


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


class _SlowApi:
    """Records what is created; each create takes ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.sent: list[str] = []

    def create(self, obj: dict[str, Any], *, limiter: TokenBucket) -> dict[str, Any]:
        limiter.acquire()  # as KubeApi.request does
        time.sleep(self.delay)
        self.sent.append(str(obj["reason"]))
        return obj


def test_a_burst_of_ten_times_the_rate_goes_out_at_once() -> None:
    # 20 Events at 2/s: the burst (10x) sends them all at once.
    api = _SlowApi(0.0)
    recorder = EventRecorder(api, "op-1", lambda: True, event_qps=2)  # type: ignore[arg-type]
    recorder.start()
    for i in range(20):
        recorder.emit(_job(), Event("Normal", "SuccessfulCreatePod", f"Created pod: p-{i}"))
    deadline = time.monotonic() + 5
    while len(api.sent) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(api.sent) == 20
    recorder.stop()


def test_stopping_sends_warnings_first_and_counts_what_it_drops() -> None:
    api = _SlowApi(0.05)  # 20 Events a second
    recorder = EventRecorder(api, "op-1", lambda: True, event_qps=0.001)  # type: ignore[arg-type]
    for i in range(60):
        recorder.emit(_job(), Event("Normal", "SuccessfulCreatePod", f"Created pod: p-{i}"))
    recorder.emit(_job(), Event("Warning", "ExitedWithCode", "Pod: a.b exited with code 1"))
    recorder.start()
    time.sleep(0.2)  # one Event sent (a burst of 1), the next waits ~1,000 s for a token
    began = time.monotonic()
    recorder.stop(flush_seconds=0.5)
    took = time.monotonic() - began
    # The wait for a token ends and that Event goes; then the Warning, queued last.
    assert api.sent[2] == "ExitedWithCode"
    # Sent without waiting for the (tiny) rate, until the flush ran out of time.
    assert 5 <= len(api.sent) < 61
    assert recorder.dropped == {"SuccessfulCreatePod": 61 - len(api.sent)}
    assert took < 1.5


def test_stopping_with_an_empty_queue_returns_at_once() -> None:
    recorder = EventRecorder(_SlowApi(0), "op-1", lambda: True)  # type: ignore[arg-type]
    recorder.start()
    began = time.monotonic()
    recorder.stop()
    assert time.monotonic() - began < 0.5
    assert not recorder.dropped
