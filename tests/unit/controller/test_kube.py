"""The API adapter's pure parts: resource paths, error parsing and classes, the client
rate limiter, and Event messages."""

from __future__ import annotations

import pytest

from kubetrain.controller import reasons
from kubetrain.controller.errors import ApiError, ErrorClass, classify
from kubetrain.controller.kube import (
    BATCH_JOBS,
    JOB_RESOURCES,
    LEASES,
    PODS,
    resource_of,
)
from kubetrain.controller.ratelimit import TokenBucket


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "sub", "path"),
    [
        pytest.param(PODS, "ns", "p", "", "/api/v1/namespaces/ns/pods/p", id="core"),
        pytest.param(PODS, None, None, "", "/api/v1/pods", id="all-namespaces"),
        pytest.param(BATCH_JOBS, "ns", None, "", "/apis/batch/v1/namespaces/ns/jobs", id="group"),
        pytest.param(
            JOB_RESOURCES["MPIJob"],
            "ns",
            "j",
            "status",
            "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/j/status",
            id="status",
        ),
        pytest.param(
            LEASES,
            "kube-system",
            "l",
            "",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            id="lease",
        ),
    ],
)
def test_paths(
    resource: object, namespace: str | None, name: str | None, sub: str, path: str
) -> None:
    assert resource.path(namespace, name, sub) == path  # type: ignore[attr-defined]


def test_resource_of_knows_the_managed_kinds_only() -> None:
    assert resource_of({"kind": "TFJob"}) is JOB_RESOURCES["TFJob"]
    assert resource_of({"kind": "Job"}) is BATCH_JOBS
    with pytest.raises(ValueError, match="Deployment"):
        resource_of({"kind": "Deployment"})


def test_api_errors_carry_the_servers_message() -> None:
    body = (
        b'{"kind":"Status","reason":"Invalid",'
        b'"message":"Pod \\"x\\" is invalid: spec.containers: Required value"}'
    )
    err = ApiError.from_body(422, body, "PATCH /api/v1/namespaces/ns/pods/x")
    assert err.reason == "Invalid" and "Required value" in err.message
    assert str(err).startswith("PATCH /api/v1/namespaces/ns/pods/x: HTTP 422 Invalid")
    assert (
        ApiError.from_body(502, b"<html>bad gateway</html>", "GET /").message
        == "<html>bad gateway</html>"
    )


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (404, ErrorClass.NOT_FOUND),
        (409, ErrorClass.CONFLICT),
        (410, ErrorClass.GONE),
        (422, ErrorClass.PERMANENT),
        (400, ErrorClass.PERMANENT),
        (403, ErrorClass.TEMPORARY),
        (429, ErrorClass.TEMPORARY),
        (500, ErrorClass.TEMPORARY),
        (0, ErrorClass.TEMPORARY),
    ],
)
def test_error_classes(status: int, kind: ErrorClass) -> None:
    assert classify(ApiError(status, "", "", "")) is kind


def test_unknown_exceptions_are_temporary() -> None:
    assert classify(RuntimeError("boom")) is ErrorClass.TEMPORARY


def test_the_rate_limiter_allows_a_burst_then_paces() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)

    bucket = TokenBucket(qps=10.0, burst=3, clock=lambda: now[0], sleep=sleep)
    waits = [bucket.acquire() for _ in range(5)]  # no time passes between the calls
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == pytest.approx(0.1) and waits[4] == pytest.approx(0.2)
    assert slept == waits[3:]
    now[0] += 10.0  # a quiet period refills the bucket up to the burst, no further
    assert [bucket.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.acquire() > 0


def test_event_messages_are_truncated_to_1024_characters() -> None:
    assert reasons.truncate("x" * 5000) == "x" * 1021 + "..."
    assert reasons.truncate("short") == "short"
    assert reasons.lifecycle("TFJob", reasons.Verb.RESUMED) == "TFJobResumed"
