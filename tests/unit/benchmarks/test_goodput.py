"""benchmarks/goodput_report.py: the seeded fault schedule, rank 0's CRI log lines, the
goodput computed from them and each fault's recovery; goodput_faults.PodLogTail over real
files laid out as the kubelet lays them out; goodput_trainer's TrainJob on upstream's
runtime, resolved as Trainer v2.3 resolves it."""

from __future__ import annotations

import datetime
import itertools
from pathlib import Path

import pytest

from benchmarks.goodput import default_steps, training_seconds
from benchmarks.goodput_faults import PYTORCHJOB, TRAINJOB, PodLogTail
from benchmarks.goodput_report import (
    FAULTS,
    Fault,
    RankLog,
    SystemResult,
    cri_time,
    goodput,
    recovery,
    schedule,
    table,
)
from benchmarks.goodput_trainer import MOUNT, RUNTIME, goodput_runtime, trainjob
from kubetrain.api.trainer.defaults import apply_trainer_defaults
from kubetrain.api.trainer.loader import load_trainer_object
from kubetrain.api.trainer.runtime import RuntimeBase
from kubetrain.api.trainer.trainjob import TrainJob
from kubetrain.frameworks.registry import resolve_trainjob
from tests.conftest import REPO_ROOT
from tests.realnode.workloads import CPU, queue_objects

T0 = 1_800_000_000.0


def _line(when: float, text: str) -> str:
    """A CRI log line at ``when`` (nanoseconds, as the kubelet writes them)."""
    whole = int(when)

    stamp = datetime.datetime.fromtimestamp(whole, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    nanos = round((when - whole) * 1e9)
    return f"{stamp}.{nanos:09d}Z stdout F {text}"


def _log(*runs: tuple[str, float, list[int]]) -> RankLog:
    """Processes, each starting at a time and logging the given steps a second apart."""
    log = RankLog()
    for instance, start, steps in runs:
        log.add(instance, _line(start, "resume step=0"))
        for offset, step in enumerate(steps, 1):
            log.add(instance, _line(start + offset, f"step={step} loss=0.1 lr=0.1"))
    return log


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    first = schedule(7, 600.0)
    assert first == schedule(7, 600.0)
    assert first != schedule(8, 600.0)
    assert sorted(f.kind for f in first) == sorted(FAULTS)


@pytest.mark.parametrize("seed", range(20), ids=lambda s: f"seed-{s}")
def test_faults_are_spread_at_least_the_gap_apart_inside_the_run(seed: int) -> None:
    faults = schedule(seed, 600.0, gap=90.0, lead=60.0, tail=90.0)
    times = [f.at for f in faults]
    assert times == sorted(times)
    assert times[0] >= 60.0 and times[-1] <= 510.0
    assert all(b - a >= 90.0 - 0.1 for a, b in itertools.pairwise(times))


def test_rejects_a_run_too_short_for_its_faults() -> None:
    with pytest.raises(ValueError, match=r"need a run of at least 420 s \(300 s asked\)"):
        schedule(1, 300.0)


@pytest.mark.parametrize(
    "kinds", [["kill", "kill"], ["reboot"], []], ids=["twice", "unknown", "none"]
)
def test_rejects_fault_names_not_known_once_each(kinds: list[str]) -> None:
    with pytest.raises(ValueError, match="must be distinct names among kill, hang"):
        schedule(1, 600.0, kinds=kinds)


def test_cri_times_keep_nanoseconds_and_zones() -> None:
    assert cri_time("2026-12-07T19:33:07.123456789Z") == pytest.approx(
        cri_time("2026-12-07T19:33:07Z") + 0.123456789
    )
    assert cri_time("2026-12-07T20:33:07+01:00") == cri_time("2026-12-07T19:33:07Z")
    with pytest.raises(ValueError, match="is not an RFC 3339 time"):
        cri_time("yesterday")


def test_step_lines_are_read_from_rank_0s_log_and_other_lines_are_not() -> None:
    log = RankLog()
    log.add("a/0.log", _line(T0, "checkpoint step=20 path=/c"))
    log.add("a/0.log", _line(T0 + 1, "step=21 loss=0.5 lr=0.1 samples_per_sec=10"))
    log.add("a/0.log", "not a CRI line")
    log.add("a/0.log", _line(T0 + 2, "final rank=0 step=21 params_sha256=ab"))
    [step] = log.steps()
    assert (step.step, step.instance) == (21, "a/0.log")
    assert step.time == pytest.approx(T0 + 1)
    assert log.started("a/0.log") == pytest.approx(T0)


def test_goodput_of_an_undisturbed_run_is_its_steps_over_the_wall() -> None:
    log = _log(("a", T0 + 10, list(range(1, 11))))
    measured = goodput(log.steps(), T0, None)
    # 10 steps of 1 s (the first counted as the median), wall from creation to step 10
    assert measured.productive == pytest.approx(10.0)
    assert measured.wall == pytest.approx(20.0)
    assert measured.ratio == pytest.approx(0.5)
    assert (measured.redone, measured.last_step) == (0, 10)


def test_a_step_redone_counts_only_its_last_execution() -> None:
    # steps 1..8, killed; resumed from the checkpoint at 5: 6..10 again
    log = _log(("a", T0, list(range(1, 9))), ("b", T0 + 20, list(range(6, 11))))
    measured = goodput(log.steps(), T0, None)
    assert measured.redone == 3
    assert measured.productive == pytest.approx(10.0)
    assert measured.wall == pytest.approx(25.0)


def test_a_job_that_did_not_finish_is_measured_to_the_deadline() -> None:
    log = _log(("a", T0, [1, 2, 3]))
    measured = goodput(log.steps(), T0, T0 + 100)
    assert measured.wall == pytest.approx(100.0)
    assert measured.ratio == pytest.approx(0.03)


def test_recovery_is_timed_to_a_process_started_after_the_fault() -> None:
    log = _log(("a", T0, list(range(1, 9))), ("b", T0 + 20, list(range(6, 11))))
    found = recovery(Fault("kill", 8.5), T0 + 8.5, log)
    # the resumed process's first step is at T0 + 21: step 6, steps 6..8 trained again
    assert found.seconds == pytest.approx(12.5)
    assert found.redone == 3


def test_recovery_is_never_when_no_process_trained_after_the_fault() -> None:
    log = _log(("a", T0, list(range(1, 9))))
    assert recovery(Fault("hang", 5.5), T0 + 5.5, log).seconds is None
    skipped = recovery(Fault("evict", 99.0), None, log, "not injected: the run ended first")
    assert skipped.note == "not injected: the run ended first"


def test_the_table_names_each_fault_and_what_was_not_measured() -> None:
    log = _log(("a", T0, list(range(1, 9))), ("b", T0 + 20, list(range(6, 11))))
    kill = recovery(Fault("kill", 8.5), T0 + 8.5, log)
    hang = recovery(Fault("hang", 30.0), T0 + 30, log)
    text = table(
        [
            SystemResult(
                "kubetrain",
                outcome="finished (Succeeded)",
                measure=goodput(log.steps(), T0, None),
                recoveries=(kill, hang),
                own_goodput="ratio=0.9",
            ),
            SystemResult("Trainer v2.3 + JobSet", skipped="no phase"),
        ]
    )
    assert "goodput 0.400 (productive 10.0 s / wall 25.0 s); steps redone 3" in text
    assert "rank 1 SIGKILL at +8 s: training again after 12.5 s, 3 steps redone" in text
    assert "rank 1 SIGSTOP at +30 s: training again after never" in text
    assert "not measured: no phase" in text


def test_the_pod_log_tail_keeps_every_file_of_the_pod_name_and_lines_split_across_polls(
    tmp_path: Path,
) -> None:
    first = tmp_path / "ns_job-master-0_uid1" / "pytorch"
    second = tmp_path / "ns_job-master-0_uid2" / "pytorch"
    other = tmp_path / "ns_job-worker-0_uid3" / "pytorch"
    for folder in (first, second, other):
        folder.mkdir(parents=True)
    (other / "0.log").write_text(_line(T0, "step=99 loss=1") + "\n")
    (first / "0.log").write_text(_line(T0, "step=1 loss=1") + "\n" + _line(T0 + 1, "step=2")[:20])
    tail = PodLogTail(tmp_path, "ns", "job-master-0")
    tail.poll()
    assert [s.step for s in tail.log.steps()] == [1]
    with (first / "0.log").open("a") as handle:
        handle.write(_line(T0 + 1, "step=2 loss=1")[20:] + "\n")
    (second / "0.log").write_text(_line(T0 + 5, "step=2 loss=1") + "\n")
    tail.poll()
    assert [(s.step, s.instance.split("_")[2][:4]) for s in tail.log.steps()] == [
        (1, "uid1"),
        (2, "uid1"),
        (2, "uid2"),
    ]


def test_the_cluster_queue_fits_one_job_of_two_pods_not_two() -> None:
    queue = next(o for o in queue_objects() if o["kind"] == "ClusterQueue")
    quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota == {"name": "cpu", "nominalQuota": "1"}  # 2 x 300m fit, 4 x 300m do not


def test_the_default_steps_fill_the_run_and_the_faults_land_while_it_trains() -> None:
    steps = default_steps(10.0, 0.5)
    assert steps == 1000
    # The faults (four, 90 s apart) fall within the steps' own training time.
    span = training_seconds(steps, 0.5)
    assert all(f.at <= span - 90 for f in schedule(1, span))


def test_the_trainjob_runs_the_same_training_on_upstreams_runtime_with_the_checkpoints(
    tmp_path: Path,
) -> None:
    runtimes = REPO_ROOT / "tests/data/upstream/trainer-v2.3.0/manifests/base/runtimes"
    runtime = goodput_runtime(runtimes, tmp_path, backoff_limit=3)
    assert runtime["metadata"]["name"] == RUNTIME
    assert runtime["spec"]["template"]["spec"]["failurePolicy"] == {"maxRestarts": 3}
    job = trainjob("goodput", "ns", "img:1", priority="batch", steps=10, every=5, delay=0.5)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "batch"
    loaded_job, loaded_runtime = load_trainer_object(job), load_trainer_object(runtime)
    assert isinstance(loaded_job, TrainJob) and isinstance(loaded_runtime, RuntimeBase)
    resolved = resolve_trainjob(
        apply_trainer_defaults(loaded_job), apply_trainer_defaults(loaded_runtime)
    )
    node = resolved.spec.replicated_jobs["node"]
    assert node.replicas == 2
    assert node.restart_policy == "OnFailure"
    pod = node.template["spec"]
    (container,) = pod["containers"]
    assert container["command"][:3] == ["torchrun", "-m", "images.pytorch.train"]
    assert container["command"][-2:] == ["--checkpoint-dir", f"{MOUNT}/goodput"]
    assert container["resources"] == {"requests": {"cpu": CPU, "memory": "1Gi"}}
    assert container["volumeMounts"] == [{"name": "checkpoints", "mountPath": MOUNT}]
    assert pod["volumes"][0]["hostPath"] == {"path": str(tmp_path), "type": "Directory"}


def test_each_kind_names_its_ranks_pods() -> None:
    assert PYTORCHJOB.rank0.format(name="j") == "j-master-0"
    assert "replica-type=worker" in PYTORCHJOB.rank1.format(name="j")
    assert TRAINJOB.rank0.format(name="j") == "j-node-0-0-?????"
    assert TRAINJOB.rank1.format(name="j").endswith("job-completion-index=1")
