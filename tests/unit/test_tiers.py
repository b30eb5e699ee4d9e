"""The test suite's own plan: every test file is in one tier, every cluster profile is
run by one process of one tier, at most two control planes run at once, the Makefile's
tier targets are the table's, and the runner's report and chart cache do what they say."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from tests import charts, tiers
from tests.profiles import FIXTURE_PROFILES, NO_CLUSTER, PROFILES, profile_of
from tests.tiers import TIERS, FixtureTime, Outcome, report, tier_of_path

ROOT = Path(__file__).resolve().parents[2]


def _test_files() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))


def test_every_test_file_is_in_exactly_one_tier() -> None:
    files = _test_files()
    assert len(files) > 100, "the glob found too few test files to prove anything"
    placed = {
        f: [t.name for t in TIERS if any(f.startswith(p + "/") for p in t.paths)] for f in files
    }
    assert {f: names for f, names in placed.items() if len(names) != 1} == {}
    assert {tier_of_path(f).name for f in files if tier_of_path(f)} == {  # type: ignore[union-attr]
        t.name for t in TIERS if t.paths
    }


def test_every_profile_is_run_by_one_tier_and_each_file_by_one_process() -> None:
    files = _test_files()
    by_profile: dict[str, set[str]] = {}
    for tier in TIERS:
        for run in tier.runs:
            for profile in run.profiles or ():
                by_profile.setdefault(profile, set()).add(tier.name)
    assert {p: t for p, t in by_profile.items() if p != NO_CLUSTER and len(t) != 1} == {}
    assert set(by_profile) - {NO_CLUSTER} == set(PROFILES)
    assert set(FIXTURE_PROFILES.values()) <= set(PROFILES)
    # Where two runs of a tier share a profile, their paths split the tier's files.
    for tier in TIERS:
        for profile in {p for r in tier.runs for p in (r.profiles or ())}:
            runs = [r for r in tier.runs if profile in (r.profiles or ())]
            for f in (f for f in files if tier_of_path(f) is tier):
                taking = [r.name for r in runs if _runs_file(tier, r, f)]
                assert len(taking) == 1, (tier.name, profile, f, taking)


def _runs_file(tier: tiers.Tier, run: tiers.Run, relative: str) -> bool:
    def under(paths: tuple[str, ...]) -> bool:
        return any(relative == p or relative.startswith(p + "/") for p in paths)

    return under(run.paths or tier.paths) and not under(run.ignore)


def test_each_run_holds_at_most_one_control_plane_and_the_node_runs_alone() -> None:
    runs = [(t.name, r) for t in TIERS for r in t.runs]
    assert {f"{t}/{r.name}": r.planes for t, r in runs if r.planes > 1} == {}
    users = {f"{t}/{r.name}" for t, r in runs if r.uses_node}
    assert users == {"realnode/realnode", "realnode/argocd", "faults/leftovers"}
    assert tiers.LIMITS.planes == 2 and tiers.LIMITS.nodes == 1


def _run(name: str, minutes: float, **kw: object) -> tiers.Run:
    return tiers.Run(name, minutes=minutes, **kw)  # type: ignore[arg-type]


def test_pick_starts_the_longest_run_that_fits_beside_those_running() -> None:
    plane = {"profiles": ("main",)}
    pending = [_run("short", 1), _run("long", 9, **plane), _run("mid", 4)]
    assert tiers.pick(pending, []) == 1
    # Two control planes run: the longest run without one comes next.
    running = [_run("a", 5, **plane), _run("b", 5, profiles=("kueue",))]
    assert tiers.pick(pending, running) == 2
    # The cores are spoken for (the trainers take two).
    assert tiers.pick(pending, [*running, _run("c", 1), _run("d", 1)]) is None
    assert tiers.pick([_run("train", 8, cores=2)], [_run("a", 5), _run("b", 5)]) == 0
    assert tiers.pick([_run("train", 8, cores=2)], [_run("a", 5)] * 3) is None
    # A short tier marked early goes before the longer ones.
    assert tiers.pick([*pending, _run("tools", 1.5, early=True)], []) == 3
    # One real node: the second profile with one waits; equals go in table order.
    node_runs = [
        _run("realnode", 8, profiles=("realnode",)),
        _run("argocd", 8, profiles=("argocd",)),
    ]
    assert tiers.pick(node_runs, []) == 0
    assert tiers.pick(node_runs[1:], node_runs[:1]) is None
    assert tiers.pick([_run("leftovers", 2, node=True)], node_runs[:1]) is None
    # Nothing runs: the longest starts even if it is larger than the limits.
    assert tiers.pick([_run("huge", 3, cores=5)], []) == 0
    assert tiers.pick([], []) is None


def test_the_tables_pool_keeps_to_the_limits_and_runs_everything() -> None:
    # The tiers after the gates, played out with each run's minutes as its duration.
    pool = [r for t in TIERS if not t.gate for r in t.runs]
    pending, clock, done = list(pool), 0.0, []
    running: list[tuple[float, tiers.Run]] = []  # (when it ends, the run)
    while pending or running:
        while (index := tiers.pick(pending, [r for _, r in running])) is not None:
            run = pending.pop(index)
            running.append((clock + run.minutes, run))
        held = [r for _, r in running]
        assert sum(r.planes for r in held) <= tiers.LIMITS.planes, [r.name for r in held]
        assert sum(r.uses_node for r in held) <= tiers.LIMITS.nodes, [r.name for r in held]
        assert sum(r.cores for r in held) <= tiers.LIMITS.cores, [r.name for r in held]
        running.sort(key=lambda item: item[0])
        clock, finished = running.pop(0)
        done.append(finished.name)
    assert sorted(done) == sorted(r.name for r in pool)
    # Longest first: no run waits behind a shorter one it could have started with.
    assert clock < sum(r.minutes for r in pool) / 2 + max(r.minutes for r in pool)


def test_the_makefiles_tier_targets_are_the_tables() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (line,) = re.findall(r"^TEST_TIERS := (.*)$", makefile, re.MULTILINE)
    assert line.split() == [t.name for t in TIERS]


def test_a_test_gets_the_profile_of_its_control_plane_fixture() -> None:
    assert profile_of(["namespace", "local_cluster"]) == "main"
    assert profile_of(["coscheduling_cluster", "kueue_cluster"]) == "kueue"
    assert profile_of(["tmp_path"]) == NO_CLUSTER


def test_rejects_a_test_that_uses_two_profiles() -> None:
    with pytest.raises(ValueError, match="profiles main, metrics"):
        profile_of(["local_cluster", "metrics_cluster"])


def test_the_report_sums_each_step_and_closes_with_the_counts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    unit = Outcome("unit", "unit", 100.0, 0, {"passed": 5}, {"tests.unit.test_a": 60.0})
    main = Outcome(
        "cluster",
        "main",
        300.0,
        1,
        {"passed": 3, "failed": 1},
        {"tests.integration.test_b": 250.0},
        [FixtureTime("local_cluster", "session", 6.0, 2.5)],
        operator_starts=4,
    )
    kueue = Outcome("cluster", "kueue", 200.0, 0, {"passed": 2}, {}, [], operator_starts=1)
    steps = {"unit": (100.0, ["unit"]), "cluster": (310.0, ["cluster"])}
    report([unit, main, kueue], steps, peak=2, total=410.0)
    out = capsys.readouterr().out
    assert re.search(
        r"^cluster\s+6\s+5:10\s+main 5:00 \(from 0:00\), kueue 3:20 \(from 0:00\)$",
        out,
        re.MULTILINE,
    ), out
    assert re.search(r"^total\s+6:50$", out, re.MULTILINE), out
    assert "4:10  cluster   tests.integration.test_b" in out
    assert "local_cluster (setup 6.0 s, teardown 2.5 s)" in out
    assert "peak control planes alive at once: 2; operators started by the tests: 5" in out
    assert out.rstrip().splitlines()[-1] == "tests: 10 passed, 1 failed"


def test_a_chart_is_exported_once_per_content_even_by_two_callers_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubetrain.gitops.stack import load_stacks

    monkeypatch.setenv("KUBETRAIN_CACHE", str(tmp_path))
    calls: list[str] = []

    def fake_files(stack: object) -> dict[str, str]:
        calls.append(getattr(stack, "version", "?"))
        return {"Chart.yaml": f"version: {getattr(stack, 'version', '?')}\n", "crds/a.yaml": "a\n"}

    monkeypatch.setattr(charts, "chart_files", fake_files)
    stack = load_stacks(root=ROOT)["local"]
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(charts.exported_chart(stack)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results[0] == results[1]
    assert charts.exported_files(stack) == fake_files(stack)
    exported_before = len(calls)
    assert charts.exported_chart(stack) == results[0]
    assert len(calls) == exported_before, "a cached chart was exported again"
    import dataclasses

    other = charts.exported_chart(dataclasses.replace(stack, version="9.9.9"))
    assert other != results[0] and (other / "Chart.yaml").read_text() == "version: 9.9.9\n"
    leftovers = [p.name for p in (tmp_path / "charts").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_every_profile_names_tools_that_make_builds() -> None:
    from cluster.tools import TOOL_NAMES

    assert {p.name: sorted(set(p.tools) - set(TOOL_NAMES)) for p in PROFILES.values()} == {
        p: [] for p in PROFILES
    }
    assert all(p.tools[0] == "control-plane" for p in PROFILES.values())


def test_the_chart_cache_names_the_chart_folder_as_the_exporter_does() -> None:
    from kubetrain.gitops.helm import CHART_NAME

    assert charts.CHART_NAME == CHART_NAME


def test_the_operator_tests_are_ordered_to_start_the_shared_operator_least() -> None:
    from types import SimpleNamespace

    from tests.conftest import SHARED_OPERATOR_TESTS, shared_operator_first

    def item(module: str, name: str, *fixtures: str) -> SimpleNamespace:
        return SimpleNamespace(path=module_paths[module], name=name, fixturenames=fixtures)

    module_paths = {
        "mixed": SHARED_OPERATOR_TESTS / "test_mixed.py",
        "own": SHARED_OPERATOR_TESTS / "test_own.py",
        "shared": SHARED_OPERATOR_TESTS / "test_shared.py",
        "elsewhere": ROOT / "tests" / "integration" / "test_elsewhere.py",
    }
    items = [
        item("elsewhere", "e1"),
        item("mixed", "m1", "operator_config"),
        item("mixed", "m2", "operator"),
        item("mixed", "m3", "operator_config"),
        item("mixed", "m4", "operator"),
        item("own", "o1", "operator_config"),
        item("shared", "s1", "operator"),
        item("elsewhere", "e2"),
    ]
    ordered = [i.name for i in shared_operator_first(items)]  # type: ignore[arg-type]
    assert ordered == ["e1", "s1", "m2", "m4", "m1", "m3", "o1", "e2"]

    def starts(sequence: list[SimpleNamespace]) -> int:
        uses = ["operator" in i.fixturenames for i in sequence]
        return sum(b and not a for a, b in zip([False, *uses], uses, strict=False))

    assert starts(items) == 3 and starts(shared_operator_first(items)) == 1  # type: ignore[arg-type]
