"""What a finished or suspended job deletes."""

from __future__ import annotations

import pytest

from kubetrain.api.common import CleanPodPolicy
from kubetrain.controller.decisions import ChildRef
from kubetrain.controller.plugins.base import Observed
from kubetrain.controller.policies import cleanup, suspend
from tests.unit.controller.builders import batch_job, pod, service


def scene() -> Observed:
    return Observed(
        pods={
            "job-master-0": pod("job-master-0", "Succeeded"),
            "job-worker-0": pod("job-worker-0", "Running"),
            "job-worker-1": pod("job-worker-1", "Failed", exit_code=1),
            "job-worker-2": pod("job-worker-2", "Pending"),
            "job-worker-3": pod("job-worker-3", "Running", deleting=True),
            "job-launcher-x": pod("job-launcher-x", "Running", owner_kind="Job"),
        },
        services={
            "job-master-0": service("job-master-0"),
            "job-worker-0": service("job-worker-0"),
            "job-worker-1": service("job-worker-1"),
            "job": service("job", replica_index=False),
        },
        batch_jobs={"job-launcher": batch_job("job-launcher")},
    )


def names(refs: list[ChildRef]) -> set[tuple[str, str]]:
    return {(r.kind, r.name) for r in refs}


@pytest.mark.parametrize("policy", [CleanPodPolicy.RUNNING, CleanPodPolicy.NONE])
def test_active_pods_always_stop_and_finished_ones_stay(policy: CleanPodPolicy) -> None:
    assert names(cleanup.children_to_delete(policy, scene())) == {
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-2"),
        ("Service", "job-worker-0"),
        ("Job", "job-launcher"),  # still active: stopped with the job
    }


def test_all_deletes_every_pod_service_and_the_launcher() -> None:
    assert names(cleanup.children_to_delete(CleanPodPolicy.ALL, scene())) == {
        ("Pod", "job-master-0"),
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-1"),
        ("Pod", "job-worker-2"),
        ("Service", "job-master-0"),
        ("Service", "job-worker-0"),
        ("Service", "job-worker-1"),
        ("Service", "job"),
        ("Job", "job-launcher"),
    }


def test_a_finished_launcher_job_is_kept_unless_all() -> None:
    done = Observed(batch_jobs={"job-launcher": batch_job("job-launcher", "Complete")})
    assert cleanup.children_to_delete(CleanPodPolicy.NONE, done) == []
    assert names(cleanup.children_to_delete(CleanPodPolicy.ALL, done)) == {("Job", "job-launcher")}


def test_suspend_deletes_pods_services_and_the_launcher_job() -> None:
    assert names(suspend.children_to_delete(scene())) == {
        ("Pod", "job-master-0"),
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-1"),
        ("Pod", "job-worker-2"),
        ("Service", "job-master-0"),
        ("Service", "job-worker-0"),
        ("Service", "job-worker-1"),
        ("Service", "job"),
        ("Job", "job-launcher"),
    }


def test_references_carry_the_uid_precondition() -> None:
    refs = cleanup.children_to_delete(CleanPodPolicy.NONE, scene())
    assert {r.uid for r in refs if r.kind == "Pod"} == {"uid-job-worker-0", "uid-job-worker-2"}
