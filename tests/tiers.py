"""The test tiers and the runner ``make test`` calls (``python -m tests.tiers``).

A tier is a set of test directories that need the same things (nothing but the venv; a
built tool; a control plane; the real node; torch and mpirun), run as pytest processes
of its own. The fastest come first, as gates: lint beside unit, and nothing else starts
unless they pass. Then ``make test-setup``, then the tiers after the gates share the
machine: their processes (one per cluster profile, ``tests/profiles.py``, so that a
control plane lives exactly as long as its tests) start in turn, the short tools tier
first and then the longest, as long as at most two control planes, one real node and
four cores' worth run at once
(``Limits``): most cluster tests wait on polls and start-ups, so side by side they end
sooner. The first process that fails stops the run: nothing starts after it, and the
processes still running are interrupted (their control planes torn down).

Every process writes a junit file and a fixture-timing file under ``build/test-results``;
a failed test is printed when it fails, and every two minutes the runner says what runs;
at the end it prints wall time per tier and per process, the slowest modules and session
fixtures, the peak number of control planes alive and the operators started, and a
closing ``tests: N passed, N failed`` line.

    python -m tests.tiers                 every tier, in order (what ``make test`` runs)
    python -m tests.tiers unit cluster    those tiers only
    python -m tests.tiers --list          the tiers, one line each (``make help``)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.profiles import NO_CLUSTER, PROFILES

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "test-results"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Run:
    """One process of a tier: pytest over the tier's paths, restricted to some profiles
    (``None``: no restriction), or a plain command. ``paths`` narrows a run to some of the
    tier's paths and ``ignore`` leaves some out, so that one profile's tests can be split
    between two processes (each with a control plane of its own).

    What it holds while it runs is what the runner schedules by (``Limits``): a control
    plane when it runs a cluster profile, the machine's one real node when its profile
    has it (or ``node``), and ``cores``. ``minutes`` is what it takes on a warm run, as
    last measured: the longest runs start first, so that the run ends soonest."""

    name: str
    profiles: tuple[str, ...] | None = None
    command: tuple[str, ...] | None = None
    paths: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    minutes: float = 1.0
    cores: int = 1
    #: pytest-xdist processes its tests are spread over (1: none, the tests run in the
    #: process itself, in order).
    workers: int = 1
    #: Its tests start real nodes of their own (on addresses of their own).
    node: bool = False
    #: Control planes its tests start themselves, one at a time (beside its profile's).
    own_planes: int = 0
    #: Started before the longer ones: a short tier whose failure should show early.
    early: bool = False
    #: The set-up goals besides the Go tools (``make test-setup-goals``) it needs before it
    #: starts (``None``: all of them).
    needs: tuple[str, ...] | None = None
    #: Go tools (``cluster.tools.TOOL_NAMES``) it needs built before it starts, beside
    #: its profile's; a test needing another one waits for it (``find_tools``).
    tools: tuple[str, ...] = ()
    #: It computes on every core it has, so in a cold run it waits until the Go lane is
    #: done: the lane is niced, and beside it the lane's last tools (which other processes
    #: wait for) came 15 minutes late. Warm, the lane is done within seconds.
    after_go_lane: bool = False

    @property
    def planes(self) -> int:
        """Control planes it keeps alive at once: its profile's (a process runs one
        profile's tests) and those its tests start."""
        return (1 if set(self.profiles or ()) - {NO_CLUSTER} else 0) + self.own_planes

    @property
    def uses_node(self) -> bool:
        return self.node or any(PROFILES[p].real_node for p in self.profiles or () if p in PROFILES)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The Go tools it waits for before it starts: its profiles' and its own."""
        named = [tool for p in self.profiles or () if p in PROFILES for tool in PROFILES[p].tools]
        return tuple(dict.fromkeys([*named, *self.tools]))


@dataclass(frozen=True)
class Tier:
    """A tier: its make target's help, the directories whose tests it runs (the marker
    its tests get is the tier's name), the make goal that sets up what it needs, and its
    processes. A tier marked ``gate`` runs alone (beside the gate before it, if
    ``beside_next``), and nothing after it starts unless it passed; the tiers after the
    last gate share the machine (``Limits``)."""

    name: str
    help: str
    paths: tuple[str, ...] = ()
    runs: tuple[Run, ...] = ()
    setup: str | None = None
    #: Run beside the next tier of the run (its output held until it ends).
    beside_next: bool = False
    gate: bool = False

    def profiles(self) -> set[str]:
        return {p for run in self.runs for p in (run.profiles or ())}


@dataclass(frozen=True)
class Limits:
    """What the tiers after the gates may hold at once: control planes (each about
    580 MiB and a share of a core even when idle), the one real node (its addresses and
    image store are the machine's), and cores (most cluster tests wait; the trainers
    compute)."""

    planes: int = 2
    nodes: int = 1
    cores: int = 4


LIMITS = Limits()


def _py(*args: str) -> tuple[str, ...]:
    return (str(BIN / "python"), *args)


#: The operator's integration tests: the main profile's longest share.
OPERATOR_TESTS = ("tests/integration/operator",)
#: The operator's modules that need a Go tool a cold set-up builds after the control
#: plane's (Trainer's e2e suite, Prometheus, Volcano's CRDs): they run in the main
#: profile's other process, which starts only once its tools are built. In the operator's
#: process, a cold run's operator held its control plane 36 minutes waiting for the
#: first two, and the processes behind it waited too; a later one waited 9 minutes in
#: test_gang for Volcano's CRDs.
LATE_TOOL_TESTS = (
    "tests/integration/operator/test_upstream_e2e.py",
    "tests/integration/operator/test_observability.py",
    "tests/integration/operator/test_gang.py",
)
_OPERATOR_FILES = tuple(
    str(path.relative_to(ROOT))
    for path in sorted((ROOT / OPERATOR_TESTS[0]).glob("test_*.py"))
    if str(path.relative_to(ROOT)) not in LATE_TOOL_TESTS
)
#: The set-up goals the cluster tiers need besides the Go tools: downloads of seconds,
#: first in the set-up's lane (torch, the Debian packages and the images come after).
QUICK_SETUP = ("venv", "openapi", "cdk8s-cli", "sdk-venv", "kueue-crds", "monitoring-crds")

TIERS: tuple[Tier, ...] = (
    Tier(
        "lint",
        "ruff, mypy --strict and the import contract",
        runs=(
            Run("ruff", command=(str(BIN / "ruff"), "check", ".")),
            Run("format", command=(str(BIN / "ruff"), "format", "--check", ".")),
            Run("mypy", command=(str(BIN / "mypy"),)),
            Run("layers", command=(str(BIN / "lint-imports"), "--no-cache")),
        ),
        beside_next=True,
        gate=True,
    ),
    Tier(
        "unit",
        "typed API, constructs, pure policies, snapshots: nothing but the venv",
        paths=("tests/unit", "tests/snapshots"),
        # Two processes: its slowest tests (the CLI's synths, the fuzzers, the chart
        # export) take seconds of a core each, one after another in a single process.
        runs=(Run("unit", profiles=(NO_CLUSTER,), workers=2),),
        gate=True,
    ),
    Tier(
        "tools",
        "a built tool, no cluster: helm, promtool, dashboard-check, the cdk8s CLI, make synth",
        paths=("tests/tools",),
        runs=(
            Run(
                "tools",
                profiles=(NO_CLUSTER,),
                minutes=1.5,
                early=True,
                needs=QUICK_SETUP,
                tools=("helm", "prometheus", "grafana", "kustomize"),
            ),
        ),
        setup="test-setup",
    ),
    Tier(
        "cluster",
        "real API servers, kwok's fake GPU nodes, the operator, Kueue, metrics-server",
        paths=("tests/integration",),
        # The main profile's tests are split: the operator's, and the rest (the API
        # server's, Helm's...), each with a main control plane of its own.
        runs=(
            Run(
                "operator",
                profiles=("main", NO_CLUSTER),
                paths=OPERATOR_TESTS,
                ignore=LATE_TOOL_TESTS,
                minutes=14,
                needs=QUICK_SETUP,
            ),
            Run("kueue", profiles=("kueue",), minutes=8.5, needs=QUICK_SETUP),
            Run("metrics", profiles=("metrics",), minutes=2.2, needs=QUICK_SETUP),
            Run(
                "main",
                profiles=("main", NO_CLUSTER),
                ignore=_OPERATOR_FILES,
                minutes=8,
                needs=QUICK_SETUP,
                # test_helm_install, test_gang_and_kueue_tools and LATE_TOOL_TESTS.
                tools=(
                    "helm",
                    "scheduler-plugins",
                    "kueue",
                    "volcano",
                    "trainer-e2e",
                    "prometheus",
                ),
            ),
        ),
        setup="test-setup",
    ),
    Tier(
        "realnode",
        "the built images, as containers and as pods on a real kubelet node; Argo CD",
        paths=("tests/images", "tests/realnode", "tests/delivery"),
        runs=(
            Run("images", profiles=(NO_CLUSTER,), minutes=1.2),
            Run("realnode", profiles=("realnode",), minutes=8.3, tools=("helm",)),
            Run("argocd", profiles=("argocd",), minutes=9.8),
        ),
        setup="test-setup",
    ),
    Tier(
        "training",
        "real torch.distributed, Horovod, mpirun, TensorFlow, JAX, XGBoost processes",
        paths=("tests/training",),
        # The trainers compute: both cores while they run.
        runs=(Run("training", profiles=(NO_CLUSTER,), minutes=7.9, cores=2, after_go_lane=True),),
        setup="test-setup",
    ),
    Tier(
        "faults",
        "a stopped control plane, killed and frozen operators, a killed node and session",
        paths=("tests/faults",),
        runs=(
            Run("faults", profiles=("faults",), minutes=1.5, needs=QUICK_SETUP),
            # Tests that start (and kill) control planes and real nodes of their own.
            Run(
                "leftovers",
                profiles=(NO_CLUSTER,),
                minutes=2,
                node=True,
                own_planes=1,
                tools=("control-plane", "node", "coredns"),
            ),
        ),
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
    #: Operators started per test module (``tests/timing.py`` keeps them per test).
    starts_by_module: dict[str, int] = field(default_factory=dict)
    #: When it started, in seconds after the runner did.
    began: float = 0.0
    #: Stopped by the runner (another process failed) before it ended.
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _pytest_command(tier: Tier, run: Run, junit: Path, extra: Sequence[str]) -> list[str]:
    paths = run.paths or tier.paths
    command = [str(BIN / "python"), "-m", "pytest", *paths, f"--tier={tier.name}"]
    command += [f"--ignore={path}" for path in run.ignore]
    if run.profiles is not None:
        command.append(f"--profile={','.join(run.profiles)}")
    if run.workers > 1:
        command += ["-n", str(run.workers), "--dist", "worksteal"]
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
    """The process's timing file, and those of its pytest-xdist workers (``path.gw0``...)."""
    for part in [path, *sorted(path.parent.glob(path.name + ".gw*"))]:
        if not part.exists():
            continue
        data = json.loads(part.read_text())
        outcome.fixtures += [
            FixtureTime(f["name"], f["scope"], float(f["setup"]), float(f["teardown"]))
            for f in data.get("fixtures", [])
        ]
        outcome.operator_starts += int(data.get("operator_starts", 0))
        for test, count in data.get("operator_starts_by_test", {}).items():
            module = test.split("::", 1)[0]
            outcome.starts_by_module[module] = outcome.starts_by_module.get(module, 0) + count


class Console:
    """The runner's output: while one process streams to the terminal, what the others
    say is held and printed once that process ends (no lines inside pytest's)."""

    def __init__(self) -> None:
        self._streaming = False
        self._held: list[str] = []
        # The set-up's lanes say what they built from threads of their own.
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            if self._streaming:
                self._held.append(text)
            else:
                sys.stdout.write(text if text.endswith("\n") else text + "\n")
                sys.stdout.flush()

    def begin_streaming(self) -> None:
        self._streaming = True

    def end_streaming(self) -> None:
        with self._lock:
            self._streaming = False
            held, self._held = self._held, []
        for text in held:
            self.say(text)


#: Niceness of the set-up's builds: the tests that run beside them come first (their
#: timeouts count; a build only ends later).
SETUP_NICENESS = 10
#: A Go lane line worth relaying: a tool starts building, or says how long it took.
_GO_NEWS = re.compile(r"^(building .* into |built in |kubelet and kube-proxy built in )")


@dataclass
class SetupStep:
    """One goal of the set-up (a Go tool, or a make goal of the other lane), as it went."""

    lane: str
    name: str
    began: float
    seconds: float = 0.0


class Setup:
    """``make test``'s set-up, beside the gates and the tests instead of before them: the Go
    tools in one lane (``make cluster-tools``, one tool after another), every other goal
    of ``make test-setup-goals`` in another, one ``make`` at a time, ``QUICK_SETUP``'s
    first (two apt-get or pip runs never overlap). Both run niced. A run of the pool
    starts once the goals it ``needs`` are done and its tools (``Run.tool_names``) are
    built; a test that needs another tool waits for it (``cluster.tools.find_tools``
    reads ``BUILDING_ENV``). On a warm cache every goal is a no-op of seconds.

    Output goes to ``build/test-results/setup-go.log`` and ``setup-rest.log``; the
    console gets a line per tool and goal. A lane that fails stops the run."""

    def __init__(self, console: Console, origin: float, runs: Sequence[Run] | None = None) -> None:
        from cluster.tools import BUILDING_ENV, ToolDirs, Versions

        RESULTS.mkdir(parents=True, exist_ok=True)
        self.console, self.origin = console, origin
        self.status = RESULTS / "setup-go.status"
        self.status.write_text("building\n", encoding="utf-8")
        self.env_name = BUILDING_ENV
        self.tool_dirs = ToolDirs.for_versions(Versions.pinned()).by_tool()
        self._tool_of = {path: tool for tool, path in self.tool_dirs.items()}
        goals = _setup_goals()
        if runs is not None and all(run.needs is not None for run in runs):
            # Only what the chosen runs need (``make test-cluster`` builds no image).
            wanted = {goal for run in runs for goal in run.needs or ()}
            goals = [goal for goal in goals if goal in wanted]
        self.goals = goals
        self.done: set[str] = set()
        self.steps: list[SetupStep] = []
        self.failure: str | None = None
        self.go_finished = False
        self.rest_finished = False
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._current: subprocess.Popen[str] | None = None
        env = dict(os.environ, KUBETRAIN_SETUP_FOR_TEST="1")
        self._env = env
        self.go_log = RESULTS / "setup-go.log"
        self.rest_log = RESULTS / "setup-rest.log"
        self.rest_log.write_text("", encoding="utf-8")
        self._go = subprocess.Popen(
            [*_niced_make(), "cluster-tools"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._threads = [
            threading.Thread(target=self._go_lane, daemon=True),
            threading.Thread(target=self._rest_lane, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        console.say(
            "== setup: beside the tests, niced: make cluster-tools "
            f"({_shown(self.go_log)}) and, one at a time, {' '.join(self.goals)} "
            f"({_shown(self.rest_log)})"
        )

    # -- the lanes ---------------------------------------------------------------------

    def _go_lane(self) -> None:
        assert self._go.stdout is not None
        step: SetupStep | None = None
        with self.go_log.open("w", encoding="utf-8") as log:
            for line in self._go.stdout:
                log.write(line)
                log.flush()
                if not _GO_NEWS.match(line):
                    continue
                if line.startswith("building "):
                    where = Path(line.rstrip().split(" into ")[-1])
                    step = self._step("go", self._tool_of.get(where, where.name))
                elif step is not None:
                    step.seconds = time.monotonic() - self.origin - step.began
                self.console.say(f"== setup [go] {line.rstrip()}")
        code = self._go.wait()
        with self._lock:
            self.go_finished = True
            if code != 0 and not self._stopping.is_set():
                self.failure = self.failure or (
                    f"make cluster-tools failed (exit {code}): {_tail(self.go_log)}"
                )
        self.status.write_text("done\n" if code == 0 else "failed\n", encoding="utf-8")

    def _rest_lane(self) -> None:
        try:
            for goal in self.goals:
                if self._stopping.is_set():
                    return
                step = self._step("rest", goal)
                with self.rest_log.open("a", encoding="utf-8") as log:
                    log.write(f"== make {goal}\n")
                    log.flush()
                    process = subprocess.Popen(
                        [*_niced_make(), goal],
                        cwd=ROOT,
                        env=self._env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        text=True,
                    )
                    with self._lock:
                        self._current = process
                    code = process.wait()
                step.seconds = time.monotonic() - self.origin - step.began
                if code != 0:
                    with self._lock:
                        self.failure = self.failure or (
                            f"make {goal} failed (exit {code}): {_tail(self.rest_log)}"
                        )
                    return
                with self._lock:
                    self.done.add(goal)
                if step.seconds >= 5:
                    self.console.say(f"== setup: make {goal} done in {_clock(step.seconds)}")
        finally:
            with self._lock:
                self.rest_finished = True

    def _step(self, lane: str, name: str) -> SetupStep:
        step = SetupStep(lane, name, time.monotonic() - self.origin)
        with self._lock:
            self.steps.append(step)
        return step

    # -- what the runner asks ----------------------------------------------------------

    @property
    def finished(self) -> bool:
        with self._lock:
            return self.go_finished and self.rest_finished

    def ready(self, run: Run) -> bool:
        """Whether ``run`` may start: the goals it needs are done and its tools built."""
        needs = self.goals if run.needs is None else run.needs
        with self._lock:
            if not (set(needs) & set(self.goals)) <= self.done:
                return False
            if run.after_go_lane and not self.go_finished:
                return False
        return all((self.tool_dirs[tool] / ".done").exists() for tool in run.tool_names)

    def stop(self) -> None:
        """Stop building: the Go lane at once (a tool is built into a directory of its
        own and moved into place when complete), the other after its current goal (an
        apt-get or pip run stopped midway could leave a package half-installed)."""
        self._stopping.set()
        if self._go.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._go.pid, signal.SIGTERM)
        with self._lock:
            current = self._current
        if current is not None and current.poll() is None:
            self.console.say("== setup: letting the goal in progress end before stopping")
        self.wait()

    def wait(self) -> None:
        for thread in self._threads:
            thread.join()


def _shown(path: Path) -> str:
    """A path as the runner prints it: relative to the repository when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _niced_make() -> list[str]:
    """``make`` for one lane of the set-up: niced, one goal at a time."""
    return ["nice", "-n", str(SETUP_NICENESS), "make", "--no-print-directory", "-j1"]


def _setup_goals() -> list[str]:
    """``make test-setup-goals``: the set-up besides the Go tools, ``QUICK_SETUP``'s first."""
    out = subprocess.run(
        ["make", "--no-print-directory", "-s", "test-setup-goals"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout.split()
    return [g for g in QUICK_SETUP if g in out] + [g for g in out if g not in QUICK_SETUP]


def _tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n" + "\n".join(text[-lines:])


class Process:
    """One run's process in flight: its output goes to its log, or to the terminal."""

    def __init__(
        self,
        tier: Tier,
        run: Run,
        extra: Sequence[str],
        *,
        stream: bool,
        console: Console,
        env: dict[str, str] | None = None,
    ) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        self.tier, self.run, self.stream, self.console = tier, run, stream, console
        self.stem = tier.name if run.name == tier.name else f"{tier.name}-{run.name}"
        self.junit = RESULTS / f"{self.stem}.xml"
        self.timing = RESULTS / f"{self.stem}.timing.json"
        self.log = RESULTS / f"{self.stem}.log"
        self.failures = RESULTS / f"{self.stem}.failures"
        workers = RESULTS.glob(self.timing.name + ".gw*")
        for stale in (self.junit, self.timing, self.failures, *workers):
            stale.unlink(missing_ok=True)
        if run.command is not None:
            command = list(run.command)
        else:
            command = _pytest_command(tier, run, self.junit, extra)
        env = dict(
            os.environ,
            **(env or {}),
            KUBETRAIN_TEST_TIMING=str(self.timing),
            KUBETRAIN_TEST_FAILURES=str(self.failures),
        )
        self.began = time.monotonic()
        self.interrupted = False
        self.interrupted_at = 0.0
        self._relayed = 0
        shown = " ".join(command[1:] if run.command is None else command)
        if stream:
            console.say(f"== {self.stem}: {shown}")
            self._out = None
        else:
            console.say(f"== {self.stem}: started (its output: {_shown(self.log)})")
            self._out = self.log.open("w")
        # A session of its own: the runner, not the terminal, decides when it stops.
        self.popen = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._out,
            start_new_session=True,
        )

    def poll(self) -> int | None:
        return self.popen.poll()

    def relay_failures(self) -> None:
        """Print the failures it reported since the last call (a log's are not seen)."""
        if self.stream:
            return
        try:
            with self.failures.open(encoding="utf-8", errors="replace") as found:
                found.seek(self._relayed)
                text = found.read()
        except OSError:
            return
        if text:
            self._relayed += len(text.encode())
            self.console.say(f"== {self.stem}: a test failed (the process goes on)\n{text}")

    def progress(self) -> str:
        """How far its pytest got (the last percentage of its log), and for how long."""
        elapsed = _clock(time.monotonic() - self.began)
        if self.stream or not self.log.exists():
            return f"{self.stem} {elapsed}"
        with self.log.open("rb") as log:
            log.seek(max(0, self.log.stat().st_size - 4096))
            tail = log.read().decode(errors="replace")
        percents = re.findall(r"\[\s*(\d+)%\]", tail)
        return f"{self.stem} {elapsed}" + (f" ({percents[-1]}%)" if percents else "")

    def interrupt(self) -> None:
        """Stop it as Ctrl-C does: pytest tears its fixtures down (control planes stop)."""
        if self.poll() is None:
            self.interrupted = True
            self.interrupted_at = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGINT)

    def kill_if_late(self, seconds: float = 120.0) -> None:
        """SIGKILL it (its process group) when an interrupt has not ended it in time; the
        next session stops the control planes it leaves (``stop_orphaned_clusters``)."""
        late = time.monotonic() - self.interrupted_at > seconds
        if self.interrupted and late and self.poll() is None:
            self.console.say(
                f"== {self.stem}: still running {seconds:.0f} s after it was interrupted: killed"
            )
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    def finish(self, origin: float) -> Outcome:
        code = self.popen.wait()
        if self._out is not None:
            self._out.close()
        outcome = Outcome(self.tier.name, self.run.name, time.monotonic() - self.began, code)
        outcome.began = self.began - origin
        outcome.interrupted = self.interrupted
        _read_junit(self.junit, outcome)
        _read_timing(self.timing, outcome)
        self.relay_failures()
        said = []
        if not self.stream:
            text = self.log.read_text(errors="replace")
            if code != 0 and not self.interrupted:
                said.append(f"== {self.stem}: output\n{text}")
            elif self.run.command is None:
                said.append(f"== {self.stem}: output\n{_tail_summary(text)}")
        if self.interrupted:
            verdict = "stopped (another process failed)"
        else:
            verdict = "ok" if code == 0 else f"FAILED (exit {code})"
        said.append(f"== {self.stem}: {verdict} in {_clock(outcome.seconds)}")
        self.console.say("\n".join(s.rstrip("\n") for s in said))
        return outcome


def _tail_summary(text: str) -> str:
    """pytest's closing lines (the durations and the summary), not its progress dots."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if "slowest" in line and "durations" in line:
            return "".join(lines[i - 1 :])
    return "".join(lines[-3:])


def pick(pending: Sequence[Run], running: Sequence[Run], limits: Limits = LIMITS) -> int | None:
    """The index in ``pending`` of the run to start now: an ``early`` one, else the
    longest, that fits beside ``running`` within ``limits`` (the first of equals), or the
    first such when nothing runs (a run larger than the limits still runs, alone);
    ``None`` when none fits."""

    def priority(i: int) -> tuple[bool, float, int]:
        return (pending[i].early, pending[i].minutes, -i)

    if not pending:
        return None
    if not running:
        return max(range(len(pending)), key=priority)
    planes = sum(r.planes for r in running)
    nodes = sum(r.uses_node for r in running)
    cores = sum(r.cores for r in running)
    fitting = [
        i
        for i, run in enumerate(pending)
        if planes + run.planes <= limits.planes
        and nodes + run.uses_node <= limits.nodes
        and cores + run.cores <= limits.cores
    ]
    return max(fitting, key=priority) if fitting else None


#: How often the runner says what is running, while nothing streams.
PROGRESS_SECONDS = 120.0


def run_pool(
    work: Sequence[tuple[Tier, Run]],
    extra: Sequence[str],
    origin: float,
    *,
    limits: Limits = LIMITS,
    stream_alone: bool = False,
    setup: Setup | None = None,
    console: Console | None = None,
) -> list[Outcome]:
    """Run ``work``'s processes side by side within ``limits``, longest first (``pick``),
    each once ``setup`` has what it needs (``Setup.ready``). The first that fails, or a
    failed set-up, stops the rest: none starts after it, and those running are
    interrupted (their fixtures torn down). ``stream_alone``: the process listed first
    streams its output (the others' is printed when they end)."""
    console = console or Console()
    pending = list(work)
    running: list[Process] = []
    outcomes: list[Outcome] = []
    failed = False
    last_progress = time.monotonic()
    try:
        while pending or running:
            if setup is not None and setup.failure and not failed:
                failed = True
                console.say(
                    f"== setup failed: {setup.failure}\n== stopping "
                    + (", ".join(p.stem for p in running) or "nothing")
                )
                for other in running:
                    other.interrupt()
                pending.clear()
            while not failed and pending:
                ready = [
                    i
                    for i, (_, r) in enumerate(pending)
                    if setup is None or setup.finished or setup.ready(r)
                ]
                if stream_alone and len(pending) == len(work):
                    index: int | None = 0
                else:
                    chosen = pick([pending[i][1] for i in ready], [p.run for p in running], limits)
                    index = None if chosen is None else ready[chosen]
                if index is None:
                    break
                tier, run = pending.pop(index)
                stream = stream_alone and not outcomes and not running
                running.append(
                    Process(
                        tier,
                        run,
                        extra if run.command is None else (),
                        stream=stream,
                        console=console,
                        # Its tests wait for a tool the set-up still builds (find_tools).
                        env={setup.env_name: str(setup.status)} if setup is not None else None,
                    )
                )
                if stream:
                    console.begin_streaming()
            time.sleep(0.5)
            for process in list(running):
                process.relay_failures()
                process.kill_if_late()
                if process.poll() is None:
                    continue
                running.remove(process)
                if process.stream:
                    console.end_streaming()
                outcome = process.finish(origin)
                outcomes.append(outcome)
                if not outcome.ok and not outcome.interrupted and not failed:
                    failed = True
                    if running or pending:
                        console.say(
                            f"== {process.stem} failed: stopping "
                            + (", ".join(p.stem for p in running) or "nothing")
                            + "; not starting "
                            + (", ".join(f"{t.name}/{r.name}" for t, r in pending) or "anything")
                        )
                    for other in running:
                        other.interrupt()
                    pending.clear()
            if (running or pending) and time.monotonic() - last_progress >= PROGRESS_SECONDS:
                last_progress = time.monotonic()
                if not any(p.stream for p in running):
                    waiting = [f"{t.name}/{r.name}" for t, r in pending]
                    console.say(
                        f"== {_clock(time.monotonic() - origin)} running: "
                        + (", ".join(p.progress() for p in running) or "nothing")
                        + (f"; not started yet: {', '.join(waiting)}" if waiting else "")
                    )
    except KeyboardInterrupt:
        for process in running:
            process.interrupt()
        _wait_or_kill(running)
        raise
    return outcomes


def _wait_or_kill(processes: Sequence[Process], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()


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
    outcomes: list[Outcome],
    steps: dict[str, tuple[float, list[str]]],
    peak: int,
    total: float,
    *,
    setup_steps: Sequence[SetupStep] = (),
) -> None:
    """The timing table: the set-up's lanes, per tier, per process, slowest modules and
    fixtures."""
    print()
    print("=" * 30 + " where make test's time went " + "=" * 30)
    by_tier: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        by_tier[outcome.tier].append(outcome)
    print(f"{'step':<22}{'tests':>8}{'wall':>10}   processes (wall)")
    for lane, label in (("go", "setup (Go tools)"), ("rest", "setup (the rest)")):
        mine = [s for s in setup_steps if s.lane == lane]
        if mine:
            span = max(s.began + s.seconds for s in mine) - min(s.began for s in mine)
            detail = ", ".join(
                f"{s.name} {_clock(s.seconds)} (from {_clock(s.began)})"
                for s in mine
                if s.seconds >= 5
            )
            print(f"{label:<22}{'':>8}{_clock(span):>10}   {detail or 'each goal under 5 s'}")
    for name, (seconds, tiers) in steps.items():
        runs = [o for t in tiers for o in by_tier.get(t, [])]
        tests = sum(sum(o.counts.values()) for o in runs)
        detail = ", ".join(
            f"{o.run} {_clock(o.seconds)} (from {_clock(o.began)})"
            + (", stopped" if o.interrupted else "")
            for o in runs
            if len(runs) > 1 or o.began
        )
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
    by_module = sorted(
        ((n, m) for o in outcomes for m, n in o.starts_by_module.items()), reverse=True
    )
    if by_module:
        shown = ", ".join(f"{Path(m).name} {n}" for n, m in by_module[:10])
        print(f"  most operator starts: {shown}")
    passed = sum(o.counts.get("passed", 0) for o in outcomes)
    failed = sum(o.counts.get("failed", 0) for o in outcomes) + sum(
        1 for o in outcomes if not o.ok and not o.counts
    )
    skipped = sum(o.counts.get("skipped", 0) for o in outcomes)
    line = f"tests: {passed} passed, {failed} failed"
    print(line + (f", {skipped} skipped" if skipped else ""))


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
    # Started in the background by a shell, the runner inherits SIGINT ignored, and so
    # would every pytest it starts: Ctrl-C and ``Process.interrupt`` would reach nothing.
    # A handler of its own is reset to the default in each child it executes.
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
    start = time.monotonic()
    code = 0
    console = Console()
    setup: Setup | None = None
    with ControlPlaneCounter() as counter:
        if not args.no_setup and any(t.setup for t in chosen):
            # From the start, beside the gates: on a warm cache it is seconds of no-ops.
            setup = Setup(console, start, [r for t in chosen if not t.gate for r in t.runs])
        try:
            for group in _groups(chosen):
                began = time.monotonic()
                if group[0].gate:
                    # A gate streams its own process (unit), with lint beside it.
                    work = [(t, r) for t in reversed(group) for r in t.runs]
                    results = run_pool(
                        work, extra, start, limits=GATE_LIMITS, stream_alone=True, console=console
                    )
                    label = " + ".join(t.name for t in group)
                    steps[label] = (time.monotonic() - began, [t.name for t in group])
                else:
                    work = [(t, r) for t in group for r in t.runs]
                    results = run_pool(work, extra, start, setup=setup, console=console)
                    for tier in group:
                        mine = [o for o in results if o.tier == tier.name]
                        if mine:
                            span = max(o.began + o.seconds for o in mine) - min(
                                o.began for o in mine
                            )
                            steps[tier.name] = (span, [tier.name])
                outcomes += results
                if not all(o.ok for o in results):
                    failed = sorted({f"{o.tier}/{o.run}" for o in results if not o.ok})
                    print(f"== {', '.join(failed)} failed: the tiers after it did not run")
                    code = 1
                    break
                if setup is not None and setup.failure:
                    print(f"== setup failed: {setup.failure}\n== no tier after it ran")
                    code = 1
                    break
        except KeyboardInterrupt:
            if setup is not None:
                setup.stop()  # its Go lane is a session of its own: Ctrl-C does not reach it
            raise
        if setup is not None:
            if code != 0:
                setup.stop()
            setup.wait()
    report(
        outcomes,
        steps,
        counter.peak,
        time.monotonic() - start,
        setup_steps=setup.steps if setup is not None else (),
    )
    return code


#: The gates (lint beside unit): unit streams, and one lint command at a time beside it.
GATE_LIMITS = Limits(planes=0, nodes=0, cores=2)


def _groups(chosen: Sequence[Tier]) -> list[list[Tier]]:
    """The chosen tiers in the steps they run in: each gate alone (with the tier it runs
    beside), then every tier after the last gate, side by side."""
    groups: list[list[Tier]] = []
    pool: list[Tier] = []
    queue = list(chosen)
    while queue:
        tier = queue.pop(0)
        if tier.gate:
            group = [tier]
            if tier.beside_next and queue and queue[0].gate:
                group.append(queue.pop(0))
            groups.append(group)
        else:
            pool.append(tier)
    return groups + ([pool] if pool else [])


if __name__ == "__main__":
    sys.exit(main())
