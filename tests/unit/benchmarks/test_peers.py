"""The peer benchmark's request count: distinct audit ids of one user agent, by call."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.peers import audit_requests


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
