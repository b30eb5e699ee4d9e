"""The peer benchmark's request count (distinct audit ids of one user agent, by call;
kube-controller-manager's Job work) and its table."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.peer_report import (
    RunResult,
    audit_requests,
    kcm_job_requests,
    print_table,
    summarize,
)


def _event(
    audit_id: str,
    verb: str,
    agent: str,
    stage: str = "ResponseComplete",
    resource: str = "pods",
    subresource: str = "",
) -> str:
    ref = {"resource": resource, "namespace": "default"}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps(
        {
            "kind": "Event",
            "auditID": audit_id,
            "verb": verb,
            "userAgent": agent,
            "stage": stage,
            "objectRef": ref,
        }
    )


def test_counts_each_request_once_by_user_agent_prefix_after_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    before = _event("old", "create", "training-operator/v0.0.0") + "\n"
    lines = [
        _event("w1", "watch", "training-operator/v0.0.0", stage="ResponseStarted"),
        _event("w1", "watch", "training-operator/v0.0.0"),  # the same watch, ended
        _event("c1", "create", "training-operator/v0.0.0 (linux/amd64)"),
        _event(
            "s1", "update", "training-operator/v0.0.0", resource="pytorchjobs", subresource="status"
        ),
        _event(
            "s2", "update", "training-operator/v0.0.0", resource="pytorchjobs", subresource="status"
        ),
        _event("c2", "create", "kubetrain-bench/0.1"),
        _event("p1", "patch", "kube-controller-manager/v1.34.4 training-operator/"),
    ]
    log.write_text(before + "\n".join(lines) + "\n" + '{"partial', encoding="utf-8")
    count, by_call, end = audit_requests(log, len(before), "training-operator/")
    assert (count, by_call) == (
        4,
        {"create pods": 1, "update pytorchjobs/status": 2, "watch pods": 1},
    )
    # The unfinished last line is left for the next read.
    assert end == log.stat().st_size - len('{"partial')


KCM_AGENT = "kube-controller-manager/v1.34.4 (linux/amd64) kubernetes/abc"


def _kcm(audit_id: str, verb: str, resource: str, namespace: str, controller: str) -> str:
    return json.dumps(
        {
            "auditID": audit_id,
            "verb": verb,
            "userAgent": f"{KCM_AGENT}/{controller}",
            "objectRef": {"resource": resource, "namespace": namespace},
        }
    )


def test_kcm_job_work_counts_jobs_and_pods_of_the_namespace_by_controller(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    lines = [
        _kcm("1", "create", "pods", "bench", "job-controller"),
        _kcm("2", "create", "pods", "bench", "job-controller"),
        _kcm("2", "create", "pods", "bench", "job-controller"),  # the same request, ended
        _kcm("3", "update", "jobs", "bench", "job-controller"),
        _kcm("4", "delete", "pods", "bench", "generic-garbage-collector"),
        _kcm("5", "create", "endpointslices", "bench", "endpointslice-controller"),
        _kcm("6", "create", "pods", "other", "job-controller"),
        _kcm("7", "watch", "pods", "", "shared-informers"),  # cluster-wide
        _event("8", "create", "jobset/v0.12.0 (linux/amd64) 09e9a3b", resource="jobs"),
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    count, by_call = kcm_job_requests(log, 0, "bench")
    assert (count, by_call) == (
        4,
        {
            "generic-garbage-collector: delete pods": 1,
            "job-controller: create pods": 2,
            "job-controller: update jobs": 1,
        },
    )


def test_an_operator_of_two_processes_counts_both_user_agents(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = [
        _event("1", "patch", "trainer-controller-manager/v0.0.0 (linux/amd64)", resource="jobsets"),
        _event("2", "create", "jobset/v0.12.0 (linux/amd64) 09e9a3b", resource="jobs"),
        _event("3", "create", "kubetrain-operator/0.1", resource="pods"),
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    count, by_call, _ = audit_requests(log, 0, ("trainer-controller-manager/", "jobset/"))
    assert (count, by_call) == (2, {"create jobs": 1, "patch jobsets": 1})


def _result(operator: str, **fields: Any) -> RunResult:
    base: dict[str, Any] = {
        "operator": operator,
        "kind": "TrainJob",
        "mode": "default",
        "qps": 20,
        "burst": 40,
        "jobs": 2,
        "running": 2,
        "first_child": [0.1, 0.2],
        "all_children": [0.3, 0.4],
        "running_times": [1.0, 2.0],
        "settings": "20/40",
    }
    return RunResult(**{**base, **fields})


def test_the_table_has_kube_controller_managers_rows(capsys: pytest.CaptureFixture[str]) -> None:
    ours = [_result("kubetrain", requests=30, kcm_requests=0, kcm_cpu=0.5)]
    peer = [
        _result(
            "trainer+jobset",
            settings="50/100 (JobSet 500/500)",
            requests=20,
            kcm_requests=16,
            kcm_cpu=1.0,
        )
    ]
    print_table("TrainJob", 2, "4 nodes", "default", ours, peer)
    out = capsys.readouterr().out
    assert "kubetrain 20/40, trainer+jobset 50/100 (JobSet 500/500)" in out
    assert re.search(r"kube-controller-manager Job\+Pod requests +0 +16 +0\.00x", out), out
    assert re.search(r"API requests with kcm's +30 +36 +0\.83x", out), out
    assert re.search(r"kube-controller-manager CPU +0\.50s +1\.00s +0\.50x", out), out
    assert summarize(peer)["all_requests"] == 36
