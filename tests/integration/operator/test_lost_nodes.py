"""Every kind keeps training when its nodes fail, on kwok's fake GPU nodes: one job of each
kind, on a pool of its own, loses a node three ways in turn (an unhealthy GPU condition,
its kubelet gone with the pods on it stuck Terminating, the Node deleted). Each time the
whole gang restarts on the pool's healthy nodes, as the job's next attempt, counted
against the infrastructure budget and never ``backoffLimit``, the Event naming the node
and the signal, and no pod waits on the lost node.

Upstream (training-operator v1.9, Trainer v2.1 with JobSet) does none of this: a pod on a
NotReady node stays Running in the API until the taint manager evicts it after 300 s, and
is then recreated alone (v1) or held Terminating forever (JobSet, jobset#576); the other
ranks keep waiting in their collective (docs/operator.md, "Infrastructure failures")."""

from __future__ import annotations

import functools
from typing import Any

from kubetrain.api import keys as K
from tests.integration.kube import condition, wait_for
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs
from tests.integration.operator.lost_nodes import (
    SIGNALS,
    every_kind,
    node_of,
    remove_pools,
    running,
    stuck_pods,
)


def _events(jobs: Jobs, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in jobs.events(name) if e.get("reason") == reason]


def ours(job: dict[str, Any]) -> dict[str, Any]:
    """kubetrain's status of the job (a TrainJob keeps it under ``status.kubetrain``)."""
    status: dict[str, Any] = job["status"]
    return status.get("kubetrain", status) if job["kind"] == "TrainJob" else status


def test_every_kind_restarts_its_gang_off_a_lost_node(
    operator: RunningOperator, jobs: Jobs
) -> None:
    names = every_kind(jobs, "ln")
    try:
        lost: dict[str, list[str]] = {name: [] for name in names.values()}
        pods = {name: running(jobs, name, 0) for name in names.values()}
        for attempt, (what, fail, signal) in enumerate(SIGNALS, start=1):
            for name in names.values():
                node = node_of(pods[name])
                lost[name].append(node)
                fail(jobs.core, node)
            for kind, name in names.items():
                pods[name] = running(jobs, name, attempt)
                on = {p["spec"]["nodeName"] for p in pods[name].values()}
                assert not on & set(lost[name]), f"{kind} {name} ({what}): pods on {on}"
                job = jobs.get(kind, name)
                assert job is not None
                gang = ours(job).get("gangRestart") or {}
                assert (gang.get("attempt"), gang.get("infrastructure")) == (attempt, attempt), (
                    kind,
                    ours(job),
                )
                expected = signal.format(node=lost[name][-1])
                events = [e for e in jobs.events(name) if e.get("reason") == "GangRestart"]
                assert any(expected in e["message"] for e in events), (kind, what, events)
        for kind, name in names.items():
            job = jobs.get(kind, name)
            assert job is not None
            # Three infrastructure restarts; backoffLimit (and the program's count) untouched.
            assert ours(job)["gangRestart"]["reason"] == "NodeLost"
            statuses = ours(job).get("replicaStatuses") or {}
            assert not any(s.get("restarts") for s in statuses.values()), (kind, statuses)
            assert (condition(job, "Failed") or {}).get("status") != "True", kind
            # Each recovery is told, with how long it took.
            recovered = wait_for(
                functools.partial(_events, jobs, name, "Recovered"),
                lambda found: len(found) == len(SIGNALS),
                what=f"{kind} {name}'s Recovered Events",
                timeout=30,
            )
            assert "running again" in recovered[-1]["message"], recovered[-1]
            for pod in pods[name].values():
                env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
                assert (env[K.ATTEMPT_ENV], env[K.RESTART_REASON_ENV]) == ("3", "NodeLost")
        # Nothing was left Terminating on the lost node: the operator forced the deletions.
        assert stuck_pods(jobs.core, jobs.namespace) == []
    finally:
        jobs.delete_every_job()
        remove_pools(jobs, list(names.values()))
