"""Progress in a local run: the trainer's processes get the variables a trainer pod gets,
a report over HTTPS with the run's token is printed and kept, anything else is refused as
the operator refuses it."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from kubetrain.local import plan_trainjob
from kubetrain.local.execute import execute
from kubetrain.local.progress import describe
from tests.builders.trainer import runtime, trainjob
from tests.unit.local.test_trainjob_plan import load_job, load_runtime

# What upstream's e2e script (test/e2e/testdata/status_update.py) does, plus a report
# with another token and one out of the schema, each printed with its answer.
SCRIPT = """
import json, os, ssl
from urllib import error, request

url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()

def send(status, bearer):
    body = json.dumps({"trainerStatus": status}).encode()
    asked = request.Request(url, data=body, headers={"Authorization": "Bearer " + bearer})
    try:
        return request.urlopen(asked, context=context).status
    except error.HTTPError as refused:
        return refused.code

when = "2026-11-27T12:00:00.250000+00:00"
print("forged", send({"progressPercentage": 1, "lastUpdatedTime": when}, "forged"))
print("invalid", send({"progressPercentage": 101, "lastUpdatedTime": when}, token))
metrics = [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
status = {"progressPercentage": 42, "estimatedRemainingSeconds": 120, "metrics": metrics}
print("sent", send({**status, "lastUpdatedTime": when}, token))
"""


def test_a_trainer_reports_progress_to_the_local_run(tmp_path: Path) -> None:
    rt = runtime("ClusterTrainingRuntime", "plain", mlPolicy={"numNodes": 1})
    job = load_job(
        trainjob(
            "tj",
            runtimeRef={"name": "plain"},
            trainer={"command": [sys.executable, "-c", SCRIPT]},
        )
    )
    plan = plan_trainjob(job, load_runtime(rt), scratch=tmp_path)
    out = io.StringIO()
    outcome = execute(plan, workdir=tmp_path, out=out)
    text = out.getvalue()
    assert outcome.phase == "Complete", text
    assert "forged 403" in text and "invalid 422" in text and "sent 200" in text, text
    assert "kubetrain: progress 42% (ETA 2m0s) loss=0.123 accuracy=0.95\n" in text
    assert outcome.progress == {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
        "lastUpdatedTime": "2026-11-27T12:00:00Z",
    }
    # One progress line: the refused reports printed nothing.
    assert text.count("kubetrain: progress") == 1


def test_describe_says_what_a_report_has() -> None:
    assert describe({"estimatedRemainingSeconds": 3725}) == "progress (ETA 1h2m5s)"
    assert describe({"lastUpdatedTime": "2026-11-27T12:00:00Z"}) == "progress reported"
