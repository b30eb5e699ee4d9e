"""The progress server over real HTTPS on loopback: what a report writes, and each
refusal (a clear metav1.Status, nothing written). The token check runs against a table
of TokenReview answers here; the integration tier runs it against the API server."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import KINDS, TRAINJOB
from kubetrain.api.progress import (
    Report,
    Reporter,
    progress_patch,
    status_path,
    token_audience,
)
from kubetrain.controller.errors import ApiError
from kubetrain.controller.status_auth import TokenAuthorizer
from kubetrain.controller.status_server import Limits, ProgressEndpoint, ProgressServer
from kubetrain.controller.status_tls import ServingCertificates
from tests.unit.controller.test_status_tls import MemoryStore

GOOD = "token-of-tj-node-0-0"
OTHER_JOB = "token-of-other-node-0-0"
PYTORCH = KINDS["PyTorchJob"]
MPI = KINDS["MPIJob"]
WORKER = "token-of-pj-worker-0"
LAUNCHER = "token-of-mj-launcher"


class Cluster:
    """TokenReview answers and pods, as the API server would give them."""

    def __init__(self) -> None:
        self.reviews: list[tuple[str, str]] = []
        self.pods = {
            "tj-node-0-0": _pod("tj-node-0-0", "uid-1", "tj"),
            "other-node-0-0": _pod("other-node-0-0", "uid-2", "other"),
            "pj-worker-0": _pod("pj-worker-0", "uid-3", "pj", "PyTorchJob", attempt=2),
            # An MPIJob's launcher pod: its batch Job's, which the MPIJob controls.
            "mj-launcher-x": _pod("mj-launcher-x", "uid-4", "mj-launcher", "Job"),
        }
        self.batch_jobs = {"mj-launcher": _pod("mj-launcher", "mj-launcher-uid", "mj", "MPIJob")}
        self.tokens = {
            GOOD: ("tj-node-0-0", "uid-1", "tj", TRAINJOB),
            OTHER_JOB: ("other-node-0-0", "uid-2", "other", TRAINJOB),
            WORKER: ("pj-worker-0", "uid-3", "pj", PYTORCH),
            LAUNCHER: ("mj-launcher-x", "uid-4", "mj", MPI),
        }
        self.written: list[tuple[str, str, dict[str, Any] | None]] = []
        self.progress: dict[tuple[str, str], dict[str, Any]] = {}
        self.missing_jobs: set[str] = set()

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        self.reviews.append((token, audience))
        found = self.tokens.get(token)
        if found is None or audience != token_audience("ns", found[2], found[3]):
            return {"authenticated": False, "error": "invalid bearer token"}
        return {
            "authenticated": True,
            "audiences": [audience],
            "user": {
                "username": "system:serviceaccount:ns:default",
                "extra": {
                    "authentication.kubernetes.io/pod-name": [found[0]],
                    "authentication.kubernetes.io/pod-uid": [found[1]],
                },
            },
        }

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.pods.get(name) if namespace == "ns" else None

    def batch_job(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.batch_jobs.get(name) if namespace == "ns" else None

    def write_report(
        self, info: KindInfo, namespace: str, name: str, report: Report, reporter: Reporter
    ) -> None:
        if name in self.missing_jobs:
            raise ApiError(404, "NotFound", f"{info.plural} {name} not found", "PATCH")
        self.written.append((namespace, name, report.trainer_status))
        patch = progress_patch(report, reporter, datetime.now(UTC))
        self.progress[(info.kind, name)] = {**self.progress.get((info.kind, name), {}), **patch}

    def read_progress(self, info: KindInfo, namespace: str, name: str) -> dict[str, Any] | None:
        return self.progress.get((info.kind, name))


def _pod(
    name: str, uid: str, job: str, kind: str = "TrainJob", *, attempt: int | None = None
) -> dict[str, Any]:
    api = "batch/v1" if kind == "Job" else "x/v1"
    owner = {"kind": kind, "apiVersion": api, "name": job, "controller": True, "uid": f"{job}-uid"}
    labels = {} if attempt is None else {"kubetrain.dev/attempt": str(attempt)}
    return {
        "metadata": {"name": name, "uid": uid, "ownerReferences": [owner], "labels": labels},
        "spec": {"nodeName": "node-1"},
    }


@pytest.fixture
def served() -> Iterator[tuple[ProgressServer, Cluster, str]]:
    cluster = Cluster()
    certificates = ServingCertificates(MemoryStore(), ["127.0.0.1"])
    limits = Limits(per_job_qps=1.0, per_job_burst=3)
    endpoint = ProgressEndpoint(TokenAuthorizer(cluster), cluster, limits)
    server = ProgressServer(endpoint, certificates, address="127.0.0.1", port=0, limits=limits)
    server.start()
    with tempfile.TemporaryDirectory() as folder:
        ca = Path(folder) / "ca.crt"
        material = certificates.material
        assert material is not None
        ca.write_text(material.ca_bundle)
        try:
            yield server, cluster, str(ca)
        finally:
            server.stop()


def report(progress: int = 42) -> dict[str, Any]:
    return {
        "trainerStatus": {
            "progressPercentage": progress,
            "estimatedRemainingSeconds": 120,
            "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
            "lastUpdatedTime": datetime.now(UTC).isoformat(),
        }
    }


def post(
    served: tuple[ProgressServer, Cluster, str],
    body: Any,
    *,
    token: str | None = GOOD,
    job: str = "tj",
    kind: KindInfo = TRAINJOB,
    path: str | None = None,
    method: str = "POST",
    **kw: Any,
) -> requests.Response:
    server, _, ca = served
    url = f"https://127.0.0.1:{server.port}" + (path or status_path("ns", job, kind))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, bytes) else None
    return requests.request(
        method,
        url,
        json=None if data else body,
        data=data,
        headers=headers,
        verify=ca,
        timeout=5,
        **kw,
    )


def test_a_report_is_written_as_the_api_server_stores_a_time(served: Any) -> None:
    response = post(served, report())
    assert response.status_code == 200, response.text
    ((namespace, name, status),) = served[1].written
    assert (namespace, name) == ("ns", "tj") and status is not None
    assert status["progressPercentage"] == 42 and status["estimatedRemainingSeconds"] == 120
    assert status["metrics"][0] == {"name": "loss", "value": "0.123"}
    assert status["lastUpdatedTime"].endswith("Z") and "." not in status["lastUpdatedTime"]
    assert response.json() == {"trainerStatus": status}


def test_a_body_without_trainer_status_writes_nothing(served: Any) -> None:
    assert post(served, {}).status_code == 200
    assert served[1].written == []


@pytest.mark.parametrize(
    ("kw", "code", "reason", "says"),
    [
        ({"token": None}, 401, "Unauthorized", "no bearer token"),
        ({"token": "forged"}, 403, "Forbidden", "not valid for audience"),
        # A pod of another TrainJob: its token's audience is its own job's.
        ({"token": OTHER_JOB}, 403, "Forbidden", "may not report TrainJob ns/tj"),
        ({"path": "/apis/trainer.kubeflow.org/v1alpha1/trainjobs"}, 404, "NotFound", "POST to"),
        ({"method": "PUT"}, 405, "MethodNotAllowed", "use POST"),
        ({"body": b"{not json"}, 400, "BadRequest", "a JSON object"),
        ({"body": b"x" * 70_000}, 413, "RequestEntityTooLarge", "at most 65536"),
    ],
    ids=["no-token", "forged-token", "other-jobs-pod", "wrong-path", "put", "not-json", "too-big"],
)
def test_rejects_bad_requests_with_a_status_and_writes_nothing(
    served: Any, kw: dict[str, Any], code: int, reason: str, says: str
) -> None:
    body = kw.pop("body", report())
    response = post(served, body, **kw)
    assert response.status_code == code, response.text
    status = response.json()
    assert (status["kind"], status["code"], status["reason"]) == ("Status", code, reason)
    assert says in status["message"]
    assert served[1].written == []


def test_rejects_a_report_out_of_the_schema_naming_each_field(served: Any) -> None:
    body = report()
    body["trainerStatus"].update(progressPercentage=101, lastUpdatedTime="yesterday", eta=5)
    response = post(served, body)
    assert response.status_code == 422
    message = response.json()["message"]
    assert "trainerStatus.progressPercentage: 101 is invalid: must be <= 100" in message
    assert "trainerStatus.lastUpdatedTime" in message and "RFC 3339" in message
    assert "trainerStatus.eta: unknown field" in message
    assert served[1].written == []


def test_rejects_a_report_for_a_trainjob_that_is_gone(served: Any) -> None:
    served[1].missing_jobs.add("tj")
    response = post(served, report())
    assert response.status_code == 404
    assert response.json()["message"] == "TrainJob ns/tj not found"


def test_a_v1_jobs_pod_reports_its_step_and_checkpoints(served: Any) -> None:
    """A PyTorchJob's pod, through its own path and audience: the step and checkpoint it
    sends, and who sent it (pod, node, gang attempt), are the job's progress."""
    ours = {"step": 120, "checkpoint": {"step": 100, "location": "/ckpt/step-100.pt"}}
    response = post(served, {"kubetrain": ours}, token=WORKER, job="pj", kind=PYTORCH)
    assert response.status_code == 200, response.text
    assert response.json() == {"kubetrain": ours}
    progress = served[1].progress[("PyTorchJob", "pj")]
    assert progress["step"] == 120 and progress["pod"] == "pj-worker-0"
    assert progress["node"] == "node-1" and progress["attempt"] == 2
    point = progress["checkpoint"]
    assert (point["step"], point["location"], point["attempt"]) == (100, "/ckpt/step-100.pt", 2)
    assert point["time"].endswith("Z")
    # A report without a checkpoint keeps the last one.
    assert post(served, {"kubetrain": {"step": 121}}, token=WORKER, job="pj", kind=PYTORCH).ok
    assert served[1].progress[("PyTorchJob", "pj")]["checkpoint"] == point
    # The TrainJob path does not take a PyTorchJob's token, nor another kind's path.
    refused = post(served, {"kubetrain": ours}, token=WORKER, job="pj")
    assert refused.status_code == 403


def test_an_mpi_launchers_pod_reports_through_its_batch_job(served: Any) -> None:
    body = {"kubetrain": {"step": 5}}
    response = post(served, body, token=LAUNCHER, job="mj", kind=MPI)
    assert response.status_code == 200, response.text
    served[1].batch_jobs["mj-launcher"]["metadata"]["ownerReferences"][0]["name"] = "another"
    served[0].endpoint.authorizer._cache.clear()
    refused = post(served, body, token=LAUNCHER, job="mj", kind=MPI)
    assert refused.status_code == 403 and "is not a pod of MPIJob ns/mj" in refused.text


def test_a_checkpoint_step_going_back_in_the_same_attempt_is_refused(served: Any) -> None:
    def checkpoint(step: int) -> requests.Response:
        body = {"kubetrain": {"checkpoint": {"step": step, "location": f"/c/{step}"}}}
        return post(served, body, token=WORKER, job="pj", kind=PYTORCH)

    assert checkpoint(200).status_code == 200
    refused = checkpoint(150)
    assert refused.status_code == 409, refused.text
    assert refused.json()["reason"] == "Conflict"
    assert "checkpoint step 150 is below the last checkpoint's, step 200" in refused.text
    assert served[1].progress[("PyTorchJob", "pj")]["checkpoint"]["step"] == 200
    # A later gang attempt that lost the checkpoint may start over.
    served[1].pods["pj-worker-0"]["metadata"]["labels"]["kubetrain.dev/attempt"] = "3"
    served[0].endpoint.authorizer._cache.clear()
    assert checkpoint(10).status_code == 200
    assert served[1].progress[("PyTorchJob", "pj")]["checkpoint"]["step"] == 10


def test_rejects_a_checkpoint_out_of_the_schema(served: Any) -> None:
    body = {"kubetrain": {"step": -1, "checkpoint": {"step": 3, "location": "x" * 2000}}}
    response = post(served, body, token=WORKER, job="pj", kind=PYTORCH)
    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert "kubetrain.step: -1 is invalid" in message
    assert "kubetrain.checkpoint.location" in message
    assert served[1].written == []


def test_rejects_reports_past_the_trainjobs_rate_with_retry_after(served: Any) -> None:
    codes = [post(served, report(p)).status_code for p in range(5)]
    assert codes[:3] == [200, 200, 200] and 429 in codes[3:]
    refused = post(served, report())
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert len(served[1].written) == codes.count(200)


def test_a_pod_reporting_again_costs_no_new_token_review(served: Any) -> None:
    for progress in (10, 20):
        assert post(served, report(progress)).status_code == 200
    assert len(served[1].reviews) == 1


def test_a_renewed_certificate_is_served_without_a_restart(served: Any) -> None:
    server = served[0]
    before = server.certificates.material
    server.certificates.serving_days = 30  # forces nothing by itself
    store = server.certificates.store
    assert isinstance(store, MemoryStore) and store.data is not None
    store.data = {**store.data, "tls.crt": "", "tls.key": ""}  # e.g. deleted by an admin
    server.reload()
    after = server.certificates.material
    assert before is not None and after is not None and after.cert_pem != before.cert_pem
    assert after.ca_bundle == before.ca_bundle
    assert post(served, report()).status_code == 200


def test_one_kept_alive_connection_carries_refusals_and_reports(served: Any) -> None:
    server, cluster, ca = served
    url = f"https://127.0.0.1:{server.port}" + status_path("ns", "tj")
    with requests.Session() as session:  # as the SDK sends every report of a process
        codes = [
            session.post(url, json=report(), headers=h, verify=ca, timeout=5).status_code
            for h in ({}, {"Authorization": "Bearer forged"}, {"Authorization": f"Bearer {GOOD}"})
        ]
    assert codes == [401, 403, 200]
    assert len(cluster.written) == 1
