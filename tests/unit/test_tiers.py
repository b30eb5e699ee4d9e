"""The test suite's own plan: every test file is in one tier, every cluster profile is
run by one process of one tier, at most two control planes run at once, the Makefile's
tier targets are the table's, and the runner's report and chart cache do what they say."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
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


def test_the_operator_modules_that_need_a_late_tool_run_where_the_runner_waits_for_it() -> None:
    """A cold set-up builds Trainer's e2e suite, Prometheus and Volcano after the control
    plane: their modules run in a process that starts once they are built, not in the
    operator's (whose control plane would wait idle, holding one of the two). Every
    operator module that asks for a tool by name (``find_tools(only=...)``) is one."""
    cluster = next(t for t in TIERS if t.name == "cluster")
    runs = {r.name: r for r in cluster.runs}
    needs = {
        "tests/integration/operator/test_upstream_e2e.py": "trainer-e2e",
        "tests/integration/operator/test_observability.py": "prometheus",
        "tests/integration/operator/test_gang.py": "volcano",
    }
    assert set(needs) == set(tiers.LATE_TOOL_TESTS)
    asking = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests/integration/operator").glob("test_*.py")
        if "find_tools(only=" in path.read_text(encoding="utf-8")
    }
    assert asking <= set(needs), asking - set(needs)
    for path, tool in needs.items():
        main_runs = [r for r in cluster.runs if "main" in (r.profiles or ())]
        (taking,) = [r for r in main_runs if _runs_file(cluster, r, path)]
        assert taking.name == "main" and tool in taking.tool_names, (path, taking)
        assert not _runs_file(cluster, runs["operator"], path)
    assert _runs_file(cluster, runs["operator"], "tests/integration/operator/test_trainjob.py")


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
        starts_by_module={"tests/integration/test_b.py": 3, "tests/integration/test_c.py": 1},
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
    assert "most operator starts: test_b.py 3, test_c.py 1" in out
    assert out.rstrip().splitlines()[-1] == "tests: 10 passed, 1 failed"


def test_the_timing_file_gives_operator_starts_per_module(tmp_path: Path) -> None:
    timing = tmp_path / "timing.json"
    timing.write_text(
        json.dumps(
            {
                "fixtures": [],
                "operator_starts": 4,
                "operator_starts_by_test": {
                    "tests/integration/operator/test_a.py::test_one": 1,
                    "tests/integration/operator/test_a.py::test_two[x]": 2,
                    "tests/integration/operator/test_b.py::test_three": 1,
                },
            }
        )
    )
    # A pytest-xdist worker's file beside it is added in.
    (tmp_path / "timing.json.gw1").write_text(
        json.dumps(
            {
                "fixtures": [{"name": "f", "scope": "session", "setup": 1.5, "teardown": 0.5}],
                "operator_starts": 1,
                "operator_starts_by_test": {"tests/integration/operator/test_b.py::test_x": 1},
            }
        )
    )
    outcome = Outcome("cluster", "operator", 1.0, 0)
    tiers._read_timing(timing, outcome)
    assert outcome.operator_starts == 5
    assert outcome.starts_by_module == {
        "tests/integration/operator/test_a.py": 3,
        "tests/integration/operator/test_b.py": 2,
    }
    assert outcome.fixtures == [FixtureTime("f", "session", 1.5, 0.5)]


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
        scoped = SimpleNamespace(scope="module")
        info = SimpleNamespace(name2fixturedefs={"made_once": [scoped]} if module == "kept" else {})
        return SimpleNamespace(
            path=module_paths[module], name=name, fixturenames=fixtures, _fixtureinfo=info
        )

    module_paths = {
        "mixed": SHARED_OPERATOR_TESTS / "test_mixed.py",
        "mixed2": SHARED_OPERATOR_TESTS / "test_mixed2.py",
        "kept": SHARED_OPERATOR_TESTS / "test_kept.py",
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
        item("mixed2", "x1", "operator"),
        item("mixed2", "x2", "operator_config"),
        item("kept", "k1", "operator_config"),
        item("kept", "k2", "operator"),
        item("own", "o1", "operator_config"),
        item("shared", "s1", "operator"),
        item("elsewhere", "e2"),
    ]
    ordered = [i.name for i in shared_operator_first(items)]  # type: ignore[arg-type]
    # Every sharing test first, in file order; a module with module-scoped fixtures and
    # both kinds stays whole between the groups, sharing first; then the private tests.
    assert ordered == ["e1", "m2", "m4", "x1", "s1", "k2", "k1", "m1", "m3", "x2", "o1", "e2"]

    def starts(sequence: list[SimpleNamespace]) -> int:
        uses = ["operator" in i.fixturenames for i in sequence]
        return sum(b and not a for a, b in zip([False, *uses], uses, strict=False))

    assert starts(items) == 4 and starts(shared_operator_first(items)) == 1  # type: ignore[arg-type]


class _Setup:
    """What ``run_pool`` asks of the set-up: which runs may start, whether it ended or
    failed (a stand-in for ``tiers.Setup``, whose lanes run ``make``)."""

    env_name = "KUBETRAIN_TOOLS_BUILDING"

    def __init__(self, status: Path, ready: set[str]) -> None:
        self.status, self.ready_names = status, ready
        self.failure: str | None = None
        self.finished = False

    def ready(self, run: tiers.Run) -> bool:
        return run.name in self.ready_names


def _stamp_run(name: str, out: Path, seconds: float = 0.0) -> tiers.Run:
    """A run whose process writes when it started and the build status it was told of."""
    code = (
        "import os, sys, time; open(sys.argv[1], 'w').write("
        "f\"{time.time()} {os.environ.get('KUBETRAIN_TOOLS_BUILDING', '-')}\"); "
        f"time.sleep({seconds})"
    )
    return tiers.Run(name, command=(sys.executable, "-c", code, str(out / name)))


def test_a_run_starts_once_the_set_up_has_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "RESULTS", tmp_path / "results")
    tier = tiers.Tier("t", "a tier")
    setup = _Setup(tmp_path / "setup-go.status", ready={"first"})
    later = []

    def provide() -> None:
        later.append(time.time())
        setup.ready_names.add("second")

    threading.Timer(1.0, provide).start()
    work = [(tier, _stamp_run("second", tmp_path)), (tier, _stamp_run("first", tmp_path))]
    outcomes = tiers.run_pool(work, [], time.monotonic(), setup=setup)  # type: ignore[arg-type]
    assert sorted(o.run for o in outcomes) == ["first", "second"] and all(o.ok for o in outcomes)
    started = {name: (tmp_path / name).read_text().split() for name in ("first", "second")}
    assert float(started["first"][0]) < later[0] <= float(started["second"][0])
    # The processes are told where the set-up says whether it still builds.
    assert started["second"][1] == str(setup.status)


def test_a_failed_set_up_stops_the_runs_and_starts_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "RESULTS", tmp_path / "results")
    tier = tiers.Tier("t", "a tier")
    setup = _Setup(tmp_path / "setup-go.status", ready={"long"})
    threading.Timer(0.5, lambda: setattr(setup, "failure", "make kueue-crds failed")).start()
    work = [(tier, _stamp_run("long", tmp_path, 60)), (tier, _stamp_run("never", tmp_path))]
    began = time.monotonic()
    outcomes = tiers.run_pool(work, [], began, setup=setup)  # type: ignore[arg-type]
    assert [(o.run, o.interrupted) for o in outcomes] == [("long", True)]
    assert time.monotonic() - began < 30 and not (tmp_path / "never").exists()


def test_the_quick_set_up_goals_are_makes_and_come_first() -> None:
    goals = tiers._setup_goals()
    assert goals[: len(tiers.QUICK_SETUP)] == list(tiers.QUICK_SETUP)
    assert {"training-deps", "images", "node-packages"} <= set(goals)
    # Every run that starts before the whole set-up names goals the set-up has.
    for run in (r for t in TIERS for r in t.runs):
        assert set(run.needs or ()) <= set(goals), run.name


FAKE_MAKE = """
import json, os, sys, time
goal = sys.argv[-1]
if goal == "cluster-tools":
    for tool, where in json.loads(os.environ["FAKE_TOOLS"]):
        print(f"building {tool} 1.0 into {where}", flush=True)
        time.sleep(0.2)
        os.makedirs(where)
        open(os.path.join(where, ".done"), "w").close()
        print("built in 0s", flush=True)
else:
    with open(os.environ["FAKE_GOALS"], "a") as done:
        done.write(goal + "\\n")
    sys.exit(2 if goal == "broken" else 0)
"""


def _fake_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, goals: list[str], tools: list[str]
) -> tuple[tiers.Setup, tiers.Console]:
    from cluster.tools import ToolDirs, Versions

    monkeypatch.setattr(tiers, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("KUBETRAIN_CACHE", str(tmp_path / "cache"))
    # make exports the control plane's directory, which would win over the cache above:
    # the fake build must not mark the real one built.
    monkeypatch.delenv("KUBETRAIN_CLUSTER_TOOLS_DIR", raising=False)
    dirs = ToolDirs.for_versions(Versions.pinned()).by_tool()
    assert all(path.is_relative_to(tmp_path) for path in dirs.values()), dirs
    monkeypatch.setenv("FAKE_TOOLS", json.dumps([(t, str(dirs[t])) for t in tools]))
    monkeypatch.setenv("FAKE_GOALS", str(tmp_path / "goals"))
    script = tmp_path / "make.py"
    script.write_text(FAKE_MAKE)
    monkeypatch.setattr(tiers, "_niced_make", lambda: [sys.executable, str(script)])
    monkeypatch.setattr(tiers, "_setup_goals", lambda: goals)
    console = tiers.Console()
    return tiers.Setup(console, time.monotonic()), console


def test_the_set_up_builds_in_two_lanes_and_says_what_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    setup, _ = _fake_setup(tmp_path, monkeypatch, ["venv", "images"], ["control-plane", "helm"])
    main = tiers.Run("main", profiles=("main",), needs=("venv",), tools=("helm",))
    computing = tiers.Run("training", needs=(), after_go_lane=True)
    assert not setup.ready(main) and not setup.ready(computing)
    setup.wait()
    assert setup.finished and setup.failure is None and setup.done == {"venv", "images"}
    assert setup.ready(main) and setup.ready(tiers.Run("all")) and setup.ready(computing)
    assert setup.status.read_text() == "done\n"
    assert (tmp_path / "goals").read_text().split() == ["venv", "images"]
    assert [(s.lane, s.name) for s in setup.steps if s.lane == "go"] == [
        ("go", "control-plane"),
        ("go", "helm"),
    ]
    go = [s for s in setup.steps if s.lane == "go"]
    # Each tool's time runs from its "building" line to its "built in" line.
    assert all(s.seconds > 0 for s in go) and go[0].began + go[0].seconds <= go[1].began, go
    out = capsys.readouterr().out
    assert "== setup [go] building helm 1.0 into" in out, out


def test_a_set_up_goal_that_fails_is_the_set_ups_failure_and_stops_its_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup, _ = _fake_setup(tmp_path, monkeypatch, ["venv", "broken", "images"], [])
    setup.wait()
    assert setup.failure is not None and setup.failure.startswith("make broken failed (exit 2)")
    assert (tmp_path / "goals").read_text().split() == ["venv", "broken"]
    assert setup.done == {"venv"}
    assert not setup.ready(tiers.Run("all")) and setup.ready(tiers.Run("q", needs=("venv",)))


def test_the_report_gives_each_set_up_lane_and_its_longer_steps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    steps = [
        tiers.SetupStep("go", "control-plane", 10.0, 560.0),
        tiers.SetupStep("go", "helm", 570.0, 90.0),
        tiers.SetupStep("rest", "venv", 0.0, 1.0),
        tiers.SetupStep("rest", "training-deps", 1.0, 400.0),
    ]
    report([], {}, peak=0, total=700.0, setup_steps=steps)
    out = capsys.readouterr().out
    assert re.search(
        r"^setup \(Go tools\)\s+10:50\s+control-plane 9:20 \(from 0:10\), helm 1:30 \(from 9:30\)$",
        out,
        re.MULTILINE,
    ), out
    assert re.search(r"^setup \(the rest\)\s+6:41\s+training-deps 6:40 \(from 0:01\)$", out, re.M)


def test_only_the_shared_operator_fixture_is_called_operator() -> None:
    """A module's own fixture named ``operator`` hides the shared one, and the shared one
    is then not stopped before the test: it runs beside the module's operator, in every
    namespace (the huge-job test's measurement had two operators on its job)."""
    shadows = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != ROOT / "tests" / "integration" / "operator" / "conftest.py"
        and re.search(r"^def operator\(", path.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert shadows == []
