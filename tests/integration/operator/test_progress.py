"""The progress server against the real API server: the operator runs as a process with
only its declared RBAC (as its Deployment would), TrainJob pods get the SDK's
environment, and the Kubeflow SDK's own ``update_trainjob_status`` reports from a process
given exactly that environment and a token from the TokenRequest API bound to the pod,
with the pod's audience (what the kubelet writes into the projected volume). The real
node tier runs the same call inside a pod."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

from kubetrain.api.progress import token_audience
from kubetrain.controller.kube import SECRETS, KubeApi
from tests.integration.credentials import (
    request_token,
)
from tests.integration.kube import apply, wait_for
from tests.integration.operator.jobs import Jobs, template, torch_runtime, train_job
from tests.integration.operator.process import OperatorProcess
from tests.integration.operator.progress import pod_token, post
from tests.integration.sdk import run_sdk

TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
POD_SERVICE_ACCOUNT = "trainer"


def _start(jobs: Jobs, name: str, runtime: str) -> dict[str, Any]:
    """A TrainJob of one node whose pod runs as the ``trainer`` ServiceAccount; its pod."""
    jobs.custom.create_namespaced_custom_object(
        *TRAINJOBS[:2], jobs.namespace, TRAINJOBS[2], train_job(name, runtime, nodes=1)
    )
    pods = jobs.wait_running(name, {f"{name}-node-0-0"})
    return pods[f"{name}-node-0-0"]


def _trainjob(jobs: Jobs, name: str) -> dict[str, Any]:
    found = jobs.custom.get_namespaced_custom_object(
        *TRAINJOBS[:2], jobs.namespace, TRAINJOBS[2], name
    )
    assert isinstance(found, dict)
    return found


def _pod_env(pod: dict[str, Any]) -> dict[str, str]:
    (node,) = pod["spec"]["containers"]
    return {e["name"]: e["value"] for e in node["env"] if "value" in e}


def _report(progress: int) -> dict[str, Any]:
    return {
        "trainerStatus": {
            "progressPercentage": progress,
            "lastUpdatedTime": "2026-11-27T12:00:00Z",
        }
    }


def test_the_sdk_reports_progress_from_a_trainjobs_pod_and_no_other_pod_can(
    progress_operator: OperatorProcess,
    admin: KubeApi,
    jobs: Jobs,
    dyn: Any,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
) -> None:
    admin.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}},
    )
    pod_template = template("node")
    pod_template["spec"]["serviceAccountName"] = POD_SERVICE_ACCOUNT
    apply(dyn, torch_runtime("torch", namespace, pod_template))
    pod = _start(jobs, "tj", "torch")
    other = _start(jobs, "other", "torch")

    # What the pod was given: the SDK's three variables, the token and CA volume, and a
    # ConfigMap holding the CA of the certificate the operator keeps in its Secret.
    env = _pod_env(pod)
    url = env["KUBEFLOW_TRAINER_SERVER_URL"]
    assert url == (
        f"https://127.0.0.1:{progress_operator.progress_port}"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/tj/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token"]
    token_source = volume["projected"]["sources"][0]["serviceAccountToken"]
    assert token_source["audience"] == token_audience(namespace, "tj")
    secret = admin.get(SECRETS, namespace, "kubetrain-progress-tls")
    assert secret is not None
    ca_bundle = base64.b64decode(secret["data"]["ca.crt"]).decode()
    config_map = jobs.core.read_namespaced_config_map("tj-tls-config", namespace)
    assert config_map.data == {"ca.crt": ca_bundle}

    # The pod's files, as the kubelet writes them from that volume.
    ca = tmp_path / "ca.crt"
    ca.write_text(config_map.data["ca.crt"])
    token_file = tmp_path / "token"
    token_file.write_text(pod_token(admin, namespace, pod, "tj"))
    sent = run_sdk(
        "report_progress",
        "42",
        "120",
        "loss=0.123",
        "accuracy=0.95",
        env={
            "KUBEFLOW_TRAINER_SERVER_URL": url,
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token_file),
        },
    )
    assert sent["sent"] is True, sent["log"]
    status = _trainjob(jobs, "tj")["status"]["trainerStatus"]
    assert status["progressPercentage"] == 42 and status["estimatedRemainingSeconds"] == 120
    assert status["metrics"] == [
        {"name": "loss", "value": "0.123"},
        {"name": "accuracy", "value": "0.95"},
    ]
    assert status["lastUpdatedTime"].endswith("Z")
    table = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", "-n", namespace, "get", "trainjobs", "tj"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    row = dict(zip(table[0].split(), table[1].split(), strict=True))
    assert (row["PROGRESS"], row["ETA"]) == ("42", "120")

    # A pod of another TrainJob: its own token (its job's audience) is refused, and so is
    # one minted for this job's audience by a pod this job does not control.
    for token in (
        pod_token(admin, namespace, other, "other"),
        pod_token(admin, namespace, other, "tj"),
        request_token(admin, namespace, POD_SERVICE_ACCOUNT),  # not bound, API audience
    ):
        code, refusal = post(url, ca, token, _report(99))
        assert (code, refusal["reason"]) == (403, "Forbidden"), refusal
    code, refusal = post(url, ca, "", _report(99))
    assert code == 401, refusal
    assert _trainjob(jobs, "tj")["status"]["trainerStatus"] == status

    # A token of a pod that is gone is refused (TokenReview checks the bound pod).
    stale = pod_token(admin, namespace, other, "other")
    jobs.core.delete_namespaced_pod(other["metadata"]["name"], namespace, grace_period_seconds=0)
    wait_for(
        lambda: [
            p
            for p in jobs.pods("other").values()
            if p["metadata"]["uid"] == other["metadata"]["uid"]
        ],
        lambda left: not left,
        what="the other pod gone",
    )
    other_url = url.replace("/trainjobs/tj/", "/trainjobs/other/")
    code, refusal = post(other_url, ca, stale, _report(5))
    assert code == 403 and "other" in refusal["message"], refusal

    # The operator's own status writes leave the reported progress alone.
    jobs.exit("tj-node-0-0", 0)
    done = wait_for(
        lambda: _trainjob(jobs, "tj"),
        lambda job: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        ),
        what="TrainJob tj Complete",
    )
    assert done["status"]["trainerStatus"] == status
    reports = progress_operator.metric("kubetrain_progress_reports_total")
    refused = progress_operator.metric(
        "kubetrain_progress_reports_total", lambda labels: labels.get("code") == "403"
    )
    assert refused == 4 and reports == 6
