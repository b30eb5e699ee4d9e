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
from tests.integration.operator.jobs import Jobs, pytorch_job
from tests.integration.operator.lost_nodes import (
    FAST,
    SIGNALS,
    create_nodes,
    every_kind,
    make_lost,
    node_of,
    pinned,
    pool,
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


def test_a_node_lost_while_the_gang_restarts_is_one_more_attempt_and_leaves_nothing(
    operator: RunningOperator, jobs: Jobs
) -> None:
    """A second node lost while the first restart is under way (the new gang just placed,
    the old one's pods still stuck on the first lost node): the restart in progress is
    abandoned for the next attempt, each loss counted once, and no pod of either old
    attempt is left behind. One pod per node (8 GPUs each), four nodes."""
    name = "ln-twice"
    create_nodes(jobs.core, pool(name, 7))  # every_kind's pools are 0-6
    job = pytorch_job(name, workers=1, gpus=8)
    job["metadata"]["annotations"] = dict(FAST)
    try:
        jobs.create(pinned(job, name))
        first = node_of(running(jobs, name, 0))
        make_lost(jobs.core, first)
        # The new gang is placed (the scheduler named a node for each pod): lose one of
        # those nodes before the restart is done.
        placed = jobs.wait_pods(
            name,
            lambda p: (
                sum(
                    1
                    for x in p.values()
                    if x["metadata"]["labels"].get(K.ATTEMPT_LABEL) == "1"
                    and x["spec"].get("nodeName")
                )
                == 2
            ),
            what=f"{name}'s attempt 1 placed",
        )
        second = next(
            p["spec"]["nodeName"]
            for p in placed.values()
            if p["metadata"]["labels"].get(K.ATTEMPT_LABEL) == "1"
        )
        make_lost(jobs.core, second)
        # Both pods of attempt 2 running (the worker is created once the master runs).
        both = {f"{name}-master-0", f"{name}-worker-0"}
        pods = wait_for(
            lambda: running(jobs, name, 2),
            lambda found: set(found) == both,
            what=f"both pods of {name}'s attempt 2 running",
        )
        on = {p["spec"]["nodeName"] for p in pods.values()}
        assert not on & {first, second}, (first, second, on)
        found = jobs.get("PyTorchJob", name)
        assert found is not None
        gang = found["status"]["gangRestart"]
        assert (gang["attempt"], gang["infrastructure"]) == (2, 2), found["status"]
        assert not any(s.get("restarts") for s in found["status"]["replicaStatuses"].values())
        events = [e["message"] for e in jobs.events(name) if e.get("reason") == "GangRestart"]
        assert len(events) == 2, events
        assert f"node {first} NotReady for" in events[0] and "attempt 1" in events[0], events
        assert f"node {second} NotReady for" in events[1] and "attempt 2" in events[1], events
        # Only attempt 2's pods exist; nothing is held Terminating on either lost node.
        assert set(jobs.pods(name)) == set(pods) == {f"{name}-master-0", f"{name}-worker-0"}
        assert stuck_pods(jobs.core, jobs.namespace) == []
    finally:
        jobs.delete_every_job()
        remove_pools(jobs, [name])
