"""The test tiers and the runner ``make test`` calls (``python -m tests.tiers``).

A tier is a set of test directories that need the same things (nothing but the venv; a
built tool; a control plane; the real node; torch and mpirun). Tiers run fastest first,
each as pytest processes of its own, and the run stops at the first tier that fails.
Inside a tier, each cluster profile (``tests/profiles.py``) is a process of its own, so
its control plane is stopped after its last test; a tier's lanes run side by side (the
cluster tier's tests mostly wait on polls and start-ups), at most two control planes at
once.

Every process writes a junit file and a fixture-timing file under ``build/test-results``;
at the end the runner prints wall time per tier and per process, the slowest modules and
session fixtures, the peak number of control planes alive and the operators started, and
a closing ``N passed, N failed`` line.

    python -m tests.tiers                 every tier, in order (what ``make test`` runs)
    python -m tests.tiers unit cluster    those tiers only
    python -m tests.tiers --list          the tiers, one line each (``make help``)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.profiles import NO_CLUSTER

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "test-results"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Run:
    """One process of a tier: pytest over the tier's paths, restricted to some profiles
    (``None``: no restriction), or a plain command. ``paths`` narrows a run to some of the
    tier's paths and ``ignore`` leaves some out, so that one profile's tests can be split
    between two processes (each with a control plane of its own)."""

    name: str
    profiles: tuple[str, ...] | None = None
    command: tuple[str, ...] | None = None
    paths: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tier:
    """A tier: its make target's help, the directories whose tests it runs (the marker
    its tests get is the tier's name), the make goal that sets up what it needs, and its
    processes in lanes (a lane's runs go one after another; lanes run side by side)."""

    name: str
    help: str
    paths: tuple[str, ...] = ()
    lanes: tuple[tuple[Run, ...], ...] = ()
    setup: str | None = None
    #: Run beside the next tier of the run (its output held until it ends).
    beside_next: bool = False

    @property
    def runs(self) -> tuple[Run, ...]:
        return tuple(run for lane in self.lanes for run in lane)

    def profiles(self) -> set[str]:
        return {p for run in self.runs for p in (run.profiles or ())}


def _py(*args: str) -> tuple[str, ...]:
    return (str(BIN / "python"), *args)


#: The operator's integration tests: the main profile's longest share.
OPERATOR_TESTS = ("tests/integration/operator",)

TIERS: tuple[Tier, ...] = (
    Tier(
        "lint",
        "ruff, mypy --strict and the import contract",
        lanes=(
            (
                Run("ruff", command=(str(BIN / "ruff"), "check", ".")),
                Run("format", command=(str(BIN / "ruff"), "format", "--check", ".")),
                Run("mypy", command=(str(BIN / "mypy"),)),
                Run("layers", command=_py("-m", "tests.layers")),
            ),
        ),
        beside_next=True,
    ),
    Tier(
        "unit",
        "typed API, constructs, pure policies, snapshots: nothing but the venv",
        paths=("tests/unit", "tests/snapshots"),
        lanes=((Run("unit", profiles=(NO_CLUSTER,)),),),
    ),
    Tier(
        "tools",
        "a built tool, no cluster: helm, promtool, dashboard-check, the cdk8s CLI, make synth",
        paths=("tests/tools",),
        lanes=((Run("tools", profiles=(NO_CLUSTER,)),),),
        setup="test-setup",
    ),
    Tier(
        "cluster",
        "real API servers, kwok's fake GPU nodes, the operator, Kueue, metrics-server",
        paths=("tests/integration",),
        # The main profile's tests are split: the operator's beside Kueue's, metrics' and
        # then the API server's (a second main control plane), at most two at once.
        lanes=(
            (Run("operator", profiles=("main", NO_CLUSTER), paths=OPERATOR_TESTS),),
            (
                Run("kueue", profiles=("kueue",)),
                Run("metrics", profiles=("metrics",)),
                Run("main", profiles=("main", NO_CLUSTER), ignore=OPERATOR_TESTS),
            ),
        ),
        setup="test-setup",
    ),
    Tier(
        "realnode",
        "the built images, as containers and as pods on a real kubelet node; Argo CD",
        paths=("tests/images", "tests/realnode", "tests/delivery"),
        # One lane: the machine has one real node's addresses and names, and the images
        # and the trainers on the node each take both cores.
        lanes=(
            (
                Run("images", profiles=(NO_CLUSTER,)),
                Run("realnode", profiles=("realnode",)),
                Run("argocd", profiles=("argocd",)),
            ),
        ),
        setup="test-setup",
    ),
    Tier(
        "training",
        "real torch.distributed, Horovod, mpirun, TensorFlow, JAX, XGBoost processes",
        paths=("tests/training",),
        lanes=((Run("training", profiles=(NO_CLUSTER,)),),),
        setup="test-setup",
    ),
    Tier(
        "faults",
        "a stopped control plane, killed and frozen operators",
        paths=("tests/faults",),
        lanes=((Run("faults", profiles=("faults",)),),),
        setup="test-setup",
    ),
)

BY_NAME = {tier.name: tier for tier in TIERS}


def tier_of_path(relative: str) -> Tier | None:
    """The tier whose directories hold this test file (a path relative to the repo)."""
    for tier in TIERS:
        if any(relative == p or relative.startswith(p + "/") for p in tier.paths):
            return tier
    return None


# -- running ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FixtureTime:
    name: str
    scope: str
    setup: float
    teardown: float

    @property
    def seconds(self) -> float:
        return self.setup + self.teardown


@dataclass
class Outcome:
    tier: str
    run: str
    seconds: float
    returncode: int
    counts: dict[str, int] = field(default_factory=dict)
    modules: dict[str, float] = field(default_factory=dict)
    fixtures: list[FixtureTime] = field(default_factory=list)
    operator_starts: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _pytest_command(tier: Tier, run: Run, junit: Path, extra: Sequence[str]) -> list[str]:
    paths = run.paths or tier.paths
    command = [str(BIN / "python"), "-m", "pytest", *paths, f"--tier={tier.name}"]
    command += [f"--ignore={path}" for path in run.ignore]
    if run.profiles is not None:
        command.append(f"--profile={','.join(run.profiles)}")
    command += [f"--junitxml={junit}", "-o", "junit_family=xunit2", "--durations=10"]
    return command + list(extra)


def _read_junit(path: Path, outcome: Outcome) -> None:
    if not path.exists():
        return
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts: dict[str, int] = defaultdict(int)
    for suite in suites:
        for case in suite.iter("testcase"):
            module = (case.get("classname") or "").split(".")
            # classname is the dotted module path (and class): keep the test_* module.
            name = next((m for m in reversed(module) if m.startswith("test_")), ".".join(module))
            path_prefix = ".".join(module[: module.index(name) + 1]) if name in module else name
            outcome.modules[path_prefix] = outcome.modules.get(path_prefix, 0.0) + float(
                case.get("time") or 0
            )
            kinds = {child.tag for child in case}
            if "failure" in kinds or "error" in kinds:
                counts["failed"] += 1
            elif "skipped" in kinds:
                counts["skipped"] += 1
            else:
                counts["passed"] += 1
    outcome.counts = dict(counts)


def _read_timing(path: Path, outcome: Outcome) -> None:
    if path.exists():
        data = json.loads(path.read_text())
        outcome.fixtures = [
            FixtureTime(f["name"], f["scope"], float(f["setup"]), float(f["teardown"]))
            for f in data.get("fixtures", [])
        ]
        outcome.operator_starts = int(data.get("operator_starts", 0))


class Console:
    """The runner's output: while one process streams to the terminal, what the other
    lanes say is held and printed once that process ends (no lines inside pytest's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streaming = False
        self._held: list[str] = []

    def say(self, text: str, *, streamer: bool = False) -> None:
        with self._lock:
            if self._streaming and not streamer:
                self._held.append(text)
            else:
                sys.stdout.write(text if text.endswith("\n") else text + "\n")
                sys.stdout.flush()

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        with self._lock:
            self._streaming = True
        try:
            yield
        finally:
            with self._lock:
                self._streaming = False
                held, self._held = self._held, []
            for text in held:
                self.say(text)


def _execute(
    tier: Tier, run: Run, extra: Sequence[str], *, stream: bool, console: Console
) -> Outcome:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = tier.name if run.name == tier.name else f"{tier.name}-{run.name}"
    junit = RESULTS / f"{stem}.xml"
    timing = RESULTS / f"{stem}.timing.json"
    log = RESULTS / f"{stem}.log"
    for stale in (junit, timing):
        stale.unlink(missing_ok=True)
    if run.command is not None:
        command = list(run.command)
    else:
        command = _pytest_command(tier, run, junit, extra)
    env = dict(os.environ, KUBETRAIN_TEST_TIMING=str(timing))
    start = time.monotonic()
    if stream:
        console.say(f"== {stem}: {' '.join(command[1:] if run.command is None else command)}")
        with console.streaming():
            code = subprocess.run(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL).returncode
    else:
        console.say(f"== {stem}: started (its output: {log.relative_to(ROOT)})")
        with log.open("w") as out:
            code = subprocess.run(
                command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
            ).returncode
    outcome = Outcome(tier.name, run.name, time.monotonic() - start, code)
    _read_junit(junit, outcome)
    _read_timing(timing, outcome)
    said = []
    if not stream:
        text = log.read_text(errors="replace")
        if code != 0 or run.command is None:
            said.append(f"== {stem}: output\n" + (text if code != 0 else _tail_summary(text)))
    verdict = "ok" if code == 0 else f"FAILED (exit {code})"
    said.append(f"== {stem}: {verdict} in {_clock(outcome.seconds)}")
    console.say("\n".join(s.rstrip("\n") for s in said))
    return outcome


def _tail_summary(text: str) -> str:
    """pytest's closing lines (the durations and the summary), not its progress dots."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "slowest" in line and "durations" in line:
            return "".join(lines[i - 1 :])
    return "".join(lines[-3:])


def run_tier(tier: Tier, extra: Sequence[str], *, alongside: Tier | None = None) -> list[Outcome]:
    """Run a tier's lanes side by side (and ``alongside``'s, whose output is held until
    its end); the first lane of ``tier`` streams its output when it is alone."""
    lanes: list[tuple[Tier, tuple[Run, ...]]] = [(tier, lane) for lane in tier.lanes]
    if alongside is not None:
        lanes += [(alongside, lane) for lane in alongside.lanes]
    console = Console()
    outcomes: list[Outcome] = []

    def lane_worker(owner: Tier, lane: tuple[Run, ...], stream: bool) -> None:
        for run in lane:
            outcome = _execute(
                owner, run, extra if run.command is None else (), stream=stream, console=console
            )
            outcomes.append(outcome)
            if not outcome.ok:
                return

    threads = []
    for i, (owner, lane) in enumerate(lanes):
        # One lane streams its output as it comes; the others' is printed at their end.
        threads.append(threading.Thread(target=lane_worker, args=(owner, lane, i == 0)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


class ControlPlaneCounter:
    """Counts the kube-apiserver processes alive every second; keeps the peak."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ControlPlaneCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, count_processes("kube-apiserver"))


def count_processes(name: str) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
            if Path(argv0.decode(errors="replace")).name == name:
                count += 1
    return count


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"


def report(
    outcomes: list[Outcome], steps: dict[str, tuple[float, list[str]]], peak: int, total: float
) -> None:
    """The timing table: per tier, per process, slowest modules and fixtures."""
    print()
    print("=" * 30 + " where make test's time went " + "=" * 30)
    by_tier: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_tier[outcome.tier].append(outcome)
    print(f"{'step':<22}{'tests':>8}{'wall':>10}   processes (wall)")
    for name, (seconds, tiers) in steps.items():
        runs = [o for t in tiers for o in by_tier.get(t, [])]
        tests = sum(sum(o.counts.values()) for o in runs)
        detail = ", ".join(f"{o.run} {_clock(o.seconds)}" for o in runs if len(runs) > 1)
        print(f"{name:<22}{tests or '':>8}{_clock(seconds):>10}   {detail}")
    print(f"{'total':<22}{'':>8}{_clock(total):>10}")
    modules = [(s, m, o.tier) for o in outcomes for m, s in o.modules.items()]
    modules.sort(reverse=True)
    print("\nslowest modules (setup, tests and teardown):")
    for seconds, module, tier in modules[:15]:
        print(f"  {_clock(seconds):>7}  {tier:<9} {module}")
    fixtures = [(fix.seconds, fix, o) for o in outcomes for fix in o.fixtures]
    fixtures.sort(key=lambda item: item[0], reverse=True)
    print("\nsession and module fixtures (setup + teardown):")
    for seconds, fix, outcome in fixtures[:15]:
        where = f"{outcome.tier}/{outcome.run}"
        print(
            f"  {_clock(seconds):>7}  {where:<18} {fix.scope:<8} {fix.name} "
            f"(setup {fix.setup:.1f} s, teardown {fix.teardown:.1f} s)"
        )
    starts = sum(o.operator_starts for o in outcomes)
    print(f"\npeak control planes alive at once: {peak}; operators started by the tests: {starts}")
    passed = sum(o.counts.get("passed", 0) for o in outcomes)
    failed = sum(o.counts.get("failed", 0) for o in outcomes) + sum(
        1 for o in outcomes if not o.ok and not o.counts
    )
    skipped = sum(o.counts.get("skipped", 0) for o in outcomes)
    line = f"tests: {passed} passed, {failed} failed"
    print(line + (f", {skipped} skipped" if skipped else ""))


def _setup(goal: str) -> int:
    return subprocess.run(
        ["make", "--no-print-directory", goal], cwd=ROOT, stdin=subprocess.DEVNULL
    ).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.tiers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("tiers", nargs="*", help="tiers to run (default: all, in order)")
    parser.add_argument("--list", action="store_true", help="print the tiers and exit")
    parser.add_argument(
        "--no-setup", action="store_true", help="do not run the tiers' make setup goals"
    )
    args, extra = parser.parse_known_args(argv)
    if args.list:
        for tier in TIERS:
            print(f"make test-{tier.name:<10} {tier.help}")
        return 0
    unknown = [name for name in args.tiers if name not in BY_NAME]
    if unknown:
        parser.error(f"unknown tier {', '.join(unknown)}: expected some of {', '.join(BY_NAME)}")
    chosen = [t for t in TIERS if not args.tiers or t.name in args.tiers]
    outcomes: list[Outcome] = []
    steps: dict[str, tuple[float, list[str]]] = {}
    done_setups: set[str] = set()
    start = time.monotonic()
    code = 0
    with ControlPlaneCounter() as counter:
        queue = list(chosen)
        while queue:
            tier = queue.pop(0)
            if tier.setup and not args.no_setup and tier.setup not in done_setups:
                began = time.monotonic()
                print(f"== setup: make {tier.setup}", flush=True)
                code = _setup(tier.setup)
                steps[f"setup ({tier.setup})"] = (time.monotonic() - began, [])
                done_setups.add(tier.setup)
                if code != 0:
                    print(f"== setup failed (exit {code}): no tier after it ran")
                    break
            # A tier marked ``beside_next`` runs beside the tier after it (which streams
            # its output): lint beside unit, both needing only the venv.
            alongside = None
            if tier.beside_next and queue:
                alongside, tier = tier, queue.pop(0)
            began = time.monotonic()
            results = run_tier(tier, extra, alongside=alongside)
            outcomes += results
            label = tier.name if alongside is None else f"{alongside.name} + {tier.name}"
            steps[label] = (
                time.monotonic() - began,
                [tier.name] + ([alongside.name] if alongside else []),
            )
            if not all(o.ok for o in results):
                failed = sorted({f"{o.tier}/{o.run}" for o in results if not o.ok})
                print(f"== {', '.join(failed)} failed: the tiers after it did not run")
                code = 1
                break
    report(outcomes, steps, counter.peak, time.monotonic() - start)
    return code


if __name__ == "__main__":
    sys.exit(main())
