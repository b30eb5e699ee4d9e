"""What a finished or suspended job deletes."""

from __future__ import annotations

import pytest

from kubetrain.api import keys as K
from kubetrain.api.common import CleanPodPolicy, ReplicaStatus
from kubetrain.controller.decisions import ChildRef
from kubetrain.controller.model import Observed
from kubetrain.controller.policies import cleanup, suspend
from tests.builders.observed import batch_job, pod, service


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


def test_running_stops_active_pods_and_keeps_finished_ones() -> None:
    assert names(cleanup.children_to_delete(CleanPodPolicy.RUNNING, scene())) == {
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-2"),
        ("Service", "job-worker-0"),
        ("Job", "job-launcher"),  # still active: stopped with the job
    }


def test_none_deletes_nothing_as_upstream_documents() -> None:
    assert cleanup.children_to_delete(CleanPodPolicy.NONE, scene()) == []


def test_spared_pods_keep_running_with_their_services() -> None:
    spare = frozenset({"job-worker-0"})
    assert names(cleanup.children_to_delete(CleanPodPolicy.RUNNING, scene(), spare=spare)) == {
        ("Pod", "job-worker-2"),
        ("Job", "job-launcher"),
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
    assert cleanup.children_to_delete(CleanPodPolicy.RUNNING, done) == []
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
    refs = cleanup.children_to_delete(CleanPodPolicy.RUNNING, scene())
    assert {r.uid for r in refs if r.kind == "Pod"} == {"uid-job-worker-0", "uid-job-worker-2"}


def test_counts_after_the_end_stay_true() -> None:
    recorded = {"Worker": ReplicaStatus(active=2, succeeded=1, failed=0, restarts=1)}
    # worker-1 exited by itself (succeeded), worker-2 was stopped by the cleanup (gone).
    later = {"Worker": ReplicaStatus(active=0, succeeded=2, failed=0)}
    counts = cleanup.counts_after_end(recorded, later)
    assert counts is not None
    assert (counts["Worker"].active, counts["Worker"].succeeded, counts["Worker"].restarts) == (
        0,
        2,
        1,
    )
    # Pods deleted under cleanPodPolicy All keep their verdict in the status.
    gone = cleanup.counts_after_end(counts, {"Worker": ReplicaStatus(active=0, succeeded=0)})
    assert gone is not None and gone["Worker"].succeeded == 2


@pytest.mark.parametrize(
    ("annotation", "expected"), [(None, 60), ("5", 5), ("0", 0), ("-1", 60), ("soon", 60)]
)
def test_grace_seconds_from_the_annotation(annotation: str | None, expected: int) -> None:
    raw = {"metadata": {"annotations": {K.SUCCESS_GRACE_ANNOTATION: annotation}}}
    assert cleanup.grace_seconds(raw if annotation is not None else {}, 60) == expected
