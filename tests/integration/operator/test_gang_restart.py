"""Whole-gang restarts on the local control plane: one failed rank restarts every pod as
a new attempt, each restart counted once against backoffLimit, also when the operator
is killed in the middle of one; per-replica restart limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubetrain.api import keys as K
from tests.integration.kube import condition
from tests.integration.operator.conftest import RunningOperator
from tests.integration.operator.jobs import Jobs, pytorch_job
from tests.integration.operator.process import OperatorProcess

NAMES = {"gang-master-0", "gang-worker-0", "gang-worker-1"}


def gang_job(limit: int = 2) -> dict[str, Any]:
    return pytorch_job(
        "gang",
        workers=2,
        restart_policy="OnFailure",
        run_policy={"backoffLimit": limit},
        annotations={K.RESTART_SCOPE_ANNOTATION: "Gang"},
    )


def attempt(job: dict[str, Any] | None) -> int:
    return int((((job or {}).get("status") or {}).get("gangRestart") or {}).get("attempt", 0))


def wait_gang(jobs: Jobs, number: int, old_uids: set[str]) -> dict[str, dict[str, Any]]:
    """Every pod of attempt ``number`` Running, none of the old ones left."""
    return jobs.wait_pods(
        "gang",
        lambda pods: (
            set(pods) == NAMES
            and all(
                p["metadata"]["labels"].get(K.ATTEMPT_LABEL) == str(number) for p in pods.values()
            )
            and all(p["metadata"]["uid"] not in old_uids for p in pods.values())
            and all(p["status"].get("phase") == "Running" for p in pods.values())
        ),
        what=f"the whole gang running as attempt {number}",
        timeout=90,
    )


def uids(pods: dict[str, dict[str, Any]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods.values()}


def test_one_failed_rank_restarts_the_whole_gang_until_the_limit(
    operator: RunningOperator, jobs: Jobs
) -> None:
    jobs.create(gang_job(limit=2))
    pods = jobs.wait_running("gang", NAMES)
    for pod in pods.values():
        assert pod["spec"]["restartPolicy"] == "Never"  # no rank restarts alone in place
        assert pod["metadata"]["labels"][K.ATTEMPT_LABEL] == "0"
    jobs.exit("gang-worker-1", 137, "OOMKilled")
    pods = wait_gang(jobs, 1, uids(pods))
    env = {e["name"]: e.get("value") for e in pods["gang-worker-0"]["spec"]["containers"][0]["env"]}
    assert env[K.ATTEMPT_ENV] == "1"
    job = jobs.wait_condition("PyTorchJob", "gang", "Running")
    assert attempt(job) == 1
    assert set(jobs.services("gang")) == NAMES
    jobs.wait_event("gang", "GangRestart")
    # A second failure is a second gang restart; the third one is over backoffLimit 2.
    jobs.exit("gang-master-0", 137, "OOMKilled")
    pods = wait_gang(jobs, 2, uids(pods))
    assert attempt(jobs.get("PyTorchJob", "gang")) == 2
    jobs.exit("gang-worker-0", 137, "OOMKilled")
    failed = condition(jobs.wait_condition("PyTorchJob", "gang", "Failed"), "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "the gang restarts allowed (2) are used up" in failed["message"]


def test_an_operator_killed_mid_restart_counts_it_once_and_leaves_no_duplicates(
    installed_crds: list[dict[str, Any]],
    kubeconfig: Path,
    namespace: str,
    jobs: Jobs,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    first = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log").start()
    processes.append(first)
    jobs.create(gang_job(limit=5))
    pods = jobs.wait_running("gang", NAMES)
    jobs.exit("gang-worker-0", 137, "OOMKilled")
    # Killed as soon as the attempt is recorded: the deletions may or may not be out.
    jobs.wait("PyTorchJob", "gang", lambda j: attempt(j) == 1, what="attempt 1 recorded")
    first.kill()
    second = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log").start()
    processes.append(second)
    wait_gang(jobs, 1, uids(pods))
    job = jobs.wait_condition("PyTorchJob", "gang", "Running")
    assert attempt(job) == 1, job["status"]
    assert set(jobs.pods("gang")) == NAMES and set(jobs.services("gang")) == NAMES


def test_a_replica_type_stops_at_its_own_restart_limit(
    operator: RunningOperator, jobs: Jobs
) -> None:
    job = pytorch_job(
        "capped", workers=1, restart_policy="ExitCode", run_policy={"backoffLimit": 10}
    )
    template = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    template["metadata"] = {"annotations": {K.MAX_RESTARTS_ANNOTATION: "1"}}
    jobs.create(job)
    pods = jobs.wait_running("capped", {"capped-master-0", "capped-worker-0"})
    # Killed by a signal: retried under ExitCode, and the program's (an eviction would be
    # the infrastructure's, not counted against max-restarts).
    jobs.exit("capped-worker-0", 137)
    old = pods["capped-worker-0"]["metadata"]["uid"]
    jobs.wait_pods(
        "capped",
        lambda p: (
            p.get("capped-worker-0", {}).get("metadata", {}).get("uid") not in (None, old)
            and p["capped-worker-0"]["status"].get("phase") == "Running"
        ),
        what="capped-worker-0 recreated once",
    )
    jobs.exit("capped-worker-0", 137)
    failed = condition(jobs.wait_condition("PyTorchJob", "capped", "Failed"), "Failed")
    assert failed is not None and "(kubetrain.dev/max-restarts 1) are used up" in failed["message"]
