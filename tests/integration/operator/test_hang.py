"""Hang detection for every kind, on kwok: each job's pod reports its step and a checkpoint
to the real progress server with the token the kubelet would give it (bound to the pod,
for its job's audience), then goes quiet. The operator (a process with only its declared
RBAC) restarts the gang once the progress timeout passes, naming the last report and the
steps to redo, tells the new pods the checkpoint, and fails the job once its hang budget
is spent. A job that never reports is held to its startup timeout only. Bad reports get a
clear 4xx and change nothing.

Upstream (training-operator v1.9, Trainer v2.3) has no hang detection: the pods of a
hung job stay Running until a person deletes them."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.api.progress import REPORTING_KINDS, status_path
from kubetrain.controller.kube import SECRETS, KubeApi
from tests.integration.kube import apply, wait_for
from tests.integration.operator.jobs import (
    Jobs,
    jax_job,
    mpi_job,
    paddle_job,
    pytorch_job,
    template,
    tf_job,
    torch_runtime,
    train_job,
    xgboost_job,
)
from tests.integration.operator.lost_nodes import running
from tests.integration.operator.process import OperatorProcess
from tests.integration.operator.progress import pod_token, post

TIMEOUT = "4"
#: One hang restart allowed: the second hang ends the job.
HANGING = {K.PROGRESS_TIMEOUT_ANNOTATION: TIMEOUT, K.HANG_RESTART_LIMIT_ANNOTATION: "1"}


def _every_kind(jobs: Jobs, apply_runtime: Any) -> dict[str, str]:
    """One job of each kind that hangs (kind -> name); the TrainJob's settings come from
    its runtime's template."""
    made = {
        "PyTorchJob": pytorch_job("h-pt", workers=1),
        "TFJob": tf_job("h-tf", workers=1),
        "MPIJob": mpi_job("h-mpi", workers=1),
        "XGBoostJob": xgboost_job("h-xgb", workers=1),
        "PaddleJob": paddle_job("h-pd", workers=1),
        "JAXJob": jax_job("h-jax", workers=1),
    }
    runtime = torch_runtime("h-rt", jobs.namespace, template("node"))
    runtime["spec"]["template"].setdefault("metadata", {})["annotations"] = dict(HANGING)
    apply_runtime(runtime)
    made["TrainJob"] = train_job("h-tj", "h-rt", nodes=1)
    names = {}
    for kind, job in made.items():
        if kind != "TrainJob":
            job["metadata"].setdefault("annotations", {}).update(HANGING)
        jobs.create(job)
        names[kind] = job["metadata"]["name"]
    return names


def _values(pod: dict[str, Any]) -> dict[str, str]:
    """The literal env values of the pod's first container."""
    env = pod["spec"]["containers"][0].get("env") or []
    return {e["name"]: e["value"] for e in env if "value" in e}


def _reporter(pods: dict[str, dict[str, Any]], kind: str) -> dict[str, Any]:
    """The pod that reports: an MPIJob's launcher (through its batch Job), else the first."""
    if kind == "MPIJob":
        return next(p for n, p in sorted(pods.items()) if "launcher" in n)
    return pods[sorted(pods)[0]]


def _status(jobs: Jobs, kind: str, name: str) -> dict[str, Any]:
    job = jobs.get(kind, name)
    assert job is not None
    status: dict[str, Any] = job.get("status") or {}
    return status.get("kubetrain", {}) if kind == "TrainJob" else status


def _failed(jobs: Jobs, kind: str, name: str) -> dict[str, Any]:
    """The job's Failed condition once it has one (a TrainJob's kubetrain record's)."""

    def found() -> dict[str, Any] | None:
        conditions = _status(jobs, kind, name).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Failed"), None)

    failed = wait_for(found, bool, what=f"{kind} {name} Failed", timeout=30)
    assert failed is not None
    return failed


class Reports:
    """Sends a job's reports as its pods would."""

    def __init__(self, operator: OperatorProcess, admin: KubeApi, namespace: str, tmp: Path):
        """Trusting the CA the operator keeps in its Secret (written under ``tmp``)."""
        self.base = f"https://127.0.0.1:{operator.progress_port}"
        self.admin, self.namespace = admin, namespace
        secret = admin.get(SECRETS, namespace, "kubetrain-progress-tls")
        assert secret is not None
        self.ca = tmp / "ca.crt"
        self.ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))

    def url(self, kind: str, name: str) -> str:
        return self.base + status_path(self.namespace, name, REPORTING_KINDS[kind])

    def send(
        self, kind: str, name: str, pod: dict[str, Any], body: dict[str, Any], token_job: str = ""
    ) -> tuple[int, dict[str, Any]]:
        token = pod_token(self.admin, self.namespace, pod, token_job or name, kind)
        return post(self.url(kind, name), self.ca, token, body)


def _checkpointed(step: int, checkpoint: int) -> dict[str, Any]:
    point = {"step": checkpoint, "location": f"/ckpt/step-{checkpoint}.pt"}
    return {"kubetrain": {"step": step, "checkpoint": point}}


def test_every_kind_restarts_when_it_stops_reporting_and_fails_past_its_budget(
    progress_operator: OperatorProcess,
    admin: KubeApi,
    jobs: Jobs,
    dyn: Any,
    namespace: str,
    tmp_path: Path,
) -> None:
    names = _every_kind(jobs, lambda obj: apply(dyn, obj))
    # A job that never reports: the progress timeout alone never restarts it, a startup
    # timeout does.
    quiet = pytorch_job("h-quiet", workers=1)
    quiet["metadata"]["annotations"] = {K.PROGRESS_TIMEOUT_ANNOTATION: TIMEOUT}
    starting = pytorch_job("h-start", workers=1)
    starting["metadata"]["annotations"] = {K.PROGRESS_STARTUP_TIMEOUT_ANNOTATION: TIMEOUT}
    jobs.create(quiet)
    jobs.create(starting)
    reports = Reports(progress_operator, admin, namespace, tmp_path)

    first = {name: running(jobs, name, 0) for name in names.values()}
    for kind, name in names.items():
        pod = _reporter(first[name], kind)
        # Every pod has the server's variables (v1 jobs: they asked for them).
        assert _values(pod)[E.TRAINER_SERVER_URL] == reports.url(kind, name)
        code, body = reports.send(kind, name, pod, _checkpointed(120, 100))
        assert code == 200, (kind, body)
        progress = _status(jobs, kind, name)["progress"]
        assert (progress["step"], progress["pod"]) == (120, pod["metadata"]["name"])
        assert progress["node"] == pod["spec"]["nodeName"] and progress["attempt"] == 0
        assert progress["checkpoint"]["step"] == 100

    # Silent past the timeout: each gang restarts, the Event says why and from where.
    for kind, name in names.items():
        event = jobs.wait_event(name, "HangRestart", timeout=30)
        message = event["message"]
        node = _reporter(first[name], kind)["spec"]["nodeName"]
        assert "no progress report for" in message and "last: step 120 at " in message, message
        assert f"from {node}" in message, message
        assert "It resumes from checkpoint step 100 (20 steps to redo)." in message, message
    second = {name: running(jobs, name, 1) for name in names.values()}
    for kind, name in names.items():
        state = _status(jobs, kind, name)["gangRestart"]
        assert (state["attempt"], state["hangs"], state["reason"]) == (1, 1, "Hang"), kind
        for pod in second[name].values():
            env = _values(pod)
            assert env[E.CHECKPOINT_STEP] == "100", (kind, pod["metadata"]["name"])
            assert env[E.CHECKPOINT_PATH] == "/ckpt/step-100.pt"
            assert env[E.RESTART_REASON] == "Hang"
        # The new gang reports, then hangs again: the budget (1) is spent.
        code, body = reports.send(
            kind, name, _reporter(second[name], kind), _checkpointed(130, 110)
        )
        assert code == 200, (kind, body)
    for kind, name in names.items():
        failed = _failed(jobs, kind, name)
        assert failed["reason"] == K.HANG_RESTART_LIMIT_EXCEEDED, (kind, failed)
        assert "the hang restarts allowed (1) are used up" in failed["message"]
        goodput = _status(jobs, kind, name)["goodput"]
        # One fault recovered from (the second ended the job): 20 steps redone, and the
        # time from checkpoint 100 to the first report of attempt 1 lost.
        assert goodput["faults"] == 1 and goodput["stepsRedone"] == 20, (kind, goodput)
        assert goodput["lostSeconds"] >= int(TIMEOUT) and "openSince" not in goodput, goodput
        assert 0 < float(goodput["ratio"]) < 1, goodput

    # The job that never reported still runs its first attempt; the one with a startup
    # timeout restarted, told apart from a hang.
    assert "gangRestart" not in _status(jobs, "PyTorchJob", "h-quiet")
    jobs.wait_event("h-start", "HangRestart", timeout=30)
    first_restart = next(e for e in jobs.events("h-start") if e["reason"] == "HangRestart")
    assert "no progress report since its pods started running" in first_restart["message"]
    assert _status(jobs, "PyTorchJob", "h-start")["gangRestart"]["reason"] == "NoProgressReport"


def test_bad_reports_are_refused_with_a_clear_status_and_change_nothing(
    progress_operator: OperatorProcess,
    admin: KubeApi,
    jobs: Jobs,
    namespace: str,
    tmp_path: Path,
) -> None:
    for name in ("b-one", "b-two"):
        job = pytorch_job(name, workers=1)
        job["metadata"]["annotations"] = {K.REPORT_PROGRESS_ANNOTATION: "true"}
        jobs.create(job)
    reports = Reports(progress_operator, admin, namespace, tmp_path)
    one = running(jobs, "b-one", 0)["b-one-master-0"]
    two = running(jobs, "b-two", 0)["b-two-master-0"]
    assert reports.send("PyTorchJob", "b-one", one, _checkpointed(50, 40))[0] == 200
    before = _status(jobs, "PyTorchJob", "b-one")["progress"]

    # Another job's pod, with its own job's token and with one for this job's audience.
    for token_job in ("b-two", "b-one"):
        code, body = reports.send("PyTorchJob", "b-one", two, _checkpointed(60, 55), token_job)
        assert (code, body["reason"]) == (403, "Forbidden"), body
    # A checkpoint step going back within the attempt.
    code, body = reports.send("PyTorchJob", "b-one", one, _checkpointed(60, 30))
    assert (code, body["reason"]) == (409, "Conflict"), body
    assert "checkpoint step 30 is below the last checkpoint's, step 40" in body["message"]
    # A body past the limit, and one out of the schema.
    token = pod_token(admin, namespace, one, "b-one", "PyTorchJob")
    url = reports.url("PyTorchJob", "b-one")
    code, body = post(url, reports.ca, token, {"kubetrain": {"step": 1}, "pad": "x" * 70_000})
    assert (code, body["reason"]) == (413, "RequestEntityTooLarge"), body
    code, body = post(url, reports.ca, token, {"kubetrain": {"step": -3}})
    assert (code, body["reason"]) == (422, "Invalid") and "kubetrain.step" in body["message"]
    assert _status(jobs, "PyTorchJob", "b-one")["progress"] == before
