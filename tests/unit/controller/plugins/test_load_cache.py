"""A v1 job is parsed once while it does not change: the cache hands back the same
result for a new resourceVersion, and reads the job again for any other change."""

from __future__ import annotations

import copy

from kubetrain.api.common import JobBase
from kubetrain.api.errors import FieldError
from kubetrain.api.pytorch import PyTorchJob, PyTorchReplicaType
from kubetrain.controller.plugins.v1 import LoadCache
from tests.builders.observed import pytorch_raw


def no_problems(job: JobBase) -> list[FieldError]:
    return []


def test_the_same_job_at_a_new_resource_version_is_not_parsed_again() -> None:
    cache = LoadCache()
    raw = pytorch_raw(workers=3)
    first = cache.load(raw, no_problems, PyTorchJob)
    assert first.job is not None
    again = copy.deepcopy(raw)
    again["metadata"]["resourceVersion"] = "8"
    again["status"] = {"startTime": "2026-01-02T12:00:00Z"}
    assert cache.load(again, no_problems, PyTorchJob) is first


def test_a_changed_spec_label_or_check_is_read_again() -> None:
    cache = LoadCache()
    raw = pytorch_raw(workers=3)
    first = cache.load(raw, no_problems, PyTorchJob)
    scaled = copy.deepcopy(raw)
    scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 5
    second = cache.load(scaled, no_problems, PyTorchJob)
    assert second is not first and second.job is not None
    assert second.job.spec.pytorch_replica_specs[PyTorchReplicaType.WORKER].replicas == 5
    labelled = copy.deepcopy(scaled)
    labelled["metadata"]["labels"] = {"team": "a"}
    assert cache.load(labelled, no_problems, PyTorchJob) is not second

    def refuses(job: JobBase) -> list[FieldError]:
        return [FieldError("spec", "refused by the plugin")]

    assert cache.load(labelled, refuses, PyTorchJob).job is None


def test_a_job_changed_in_place_is_read_again() -> None:
    cache = LoadCache()
    raw = pytorch_raw(workers=3)
    first = cache.load(raw, no_problems, PyTorchJob)
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    assert cache.load(raw, no_problems, PyTorchJob) is not first


def test_least_recently_used_jobs_leave_beyond_the_size() -> None:
    cache = LoadCache(size=2)
    jobs = []
    for uid in ("a", "b", "c"):
        raw = pytorch_raw()
        raw["metadata"]["uid"] = uid
        jobs.append((raw, cache.load(raw, no_problems, PyTorchJob)))
    assert cache.load(jobs[2][0], no_problems, PyTorchJob) is jobs[2][1]
    assert cache.load(jobs[0][0], no_problems, PyTorchJob) is not jobs[0][1]


def test_with_a_generation_the_entry_keeps_the_metadata_not_the_spec() -> None:
    cache = LoadCache()
    raw = pytorch_raw(workers=3)
    raw["metadata"]["generation"] = 1
    first = cache.load(raw, no_problems, PyTorchJob)
    again = copy.deepcopy(raw)
    again["metadata"]["resourceVersion"] = "9"
    assert cache.load(again, no_problems, PyTorchJob) is first
    ((snapshot, _check, _loaded),) = cache._entries.values()
    assert "spec" not in snapshot and snapshot["metadata"]["generation"] == 1
    # The API server counts a spec change in the generation: read again.
    scaled = copy.deepcopy(raw)
    scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 5
    scaled["metadata"]["generation"] = 2
    second = cache.load(scaled, no_problems, PyTorchJob)
    assert second is not first
    assert second.job is not None
    assert second.job.spec.pytorch_replica_specs[PyTorchReplicaType.WORKER].replicas == 5
