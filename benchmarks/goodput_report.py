"""The pure half of ``benchmarks/goodput.py``: the seeded fault schedule, rank 0's log lines
as the node's kubelet writes them (CRI format), the goodput computed from them and the
table printed per system. Nothing here talks to a cluster.

Goodput, the same external measure for every system: ``wall`` runs from the job's
creation to the last step rank 0 logged (to the deadline for a job that did not finish);
``productive`` is the sum of the durations of the steps whose results survived, a step
trained again later counting only its last execution; goodput is ``productive / wall``.
A step's duration is the time since the previous step its process logged; the first
step a process logs counts as the median step of the run (what comes before it is start
up, rendezvous and the checkpoint's load: not training).
"""

from __future__ import annotations

import datetime
import itertools
import random
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: The faults, as named on the command line and in the table.
FAULTS = ("kill", "hang", "evict", "preempt")
FAULT_TITLES = {
    "kill": "rank 1 SIGKILL",
    "hang": "rank 1 SIGSTOP",
    "evict": "rank 1 evicted",
    "preempt": "Kueue preemption",
}
#: A step line of the PyTorch sample (rank 0 logs one per step).
STEP_LINE = re.compile(r"^step=(\d+) ")
#: ``<RFC 3339 time> <stream> <P|F> <text>``: one line of a container's log file.
CRI_LINE = re.compile(r"^(\S+) (?:stdout|stderr) [PF] ?(.*)$")


@dataclass(frozen=True)
class Fault:
    """One fault: its kind and when it is injected, seconds after the job's creation."""

    kind: str
    at: float


def schedule(
    seed: int,
    duration: float,
    *,
    kinds: Sequence[str] = FAULTS,
    gap: float = 90.0,
    lead: float = 60.0,
    tail: float = 90.0,
) -> list[Fault]:
    """The faults of ``kinds`` in a seeded order at seeded times in ``[lead, duration -
    tail]``, each at least ``gap`` seconds after the one before: the same seed gives the
    same schedule for every system."""
    unknown = sorted(set(kinds) - set(FAULTS))
    if unknown or not kinds or len(set(kinds)) != len(kinds):
        raise ValueError(f"faults {list(kinds)} must be distinct names among {', '.join(FAULTS)}")
    slack = duration - lead - tail - gap * (len(kinds) - 1)
    if slack < 0:
        needed = lead + tail + gap * (len(kinds) - 1)
        raise ValueError(
            f"{len(kinds)} faults {gap:g} s apart need a run of at least {needed:g} s "
            f"({duration:g} s asked): run longer, or use fewer faults or a smaller gap"
        )
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    offsets = sorted(rng.uniform(0.0, slack) for _ in order)
    return [
        Fault(kind, round(lead + offset + gap * index, 1))
        for index, (kind, offset) in enumerate(zip(order, offsets, strict=True))
    ]


# Logs ----------------------------------------------------------------------------------


def cri_time(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 time with up to nanoseconds."""
    match = re.match(r"^(.*?T[\d:]+)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if not match:
        raise ValueError(f"{text!r} is not an RFC 3339 time")
    zone = "+00:00" if match[3] == "Z" else match[3]
    whole = datetime.datetime.fromisoformat(match[1] + zone).timestamp()
    return whole + float(f"0.{match[2] or '0'}")


@dataclass(frozen=True)
class Step:
    """One step rank 0 logged: its number, the process (``instance``) and the time."""

    step: int
    instance: str
    time: float


@dataclass
class RankLog:
    """Rank 0's lines as collected: per process (one container log file), in order."""

    lines: dict[str, list[tuple[float, str]]] = field(default_factory=dict)

    def add(self, instance: str, raw: str) -> None:
        """One line of ``instance``'s log file, CRI-formatted (others are ignored)."""
        match = CRI_LINE.match(raw.rstrip("\n"))
        if match:
            self.lines.setdefault(instance, []).append((cri_time(match[1]), match[2]))

    def started(self, instance: str) -> float:
        """The time of the first line ``instance`` logged."""
        return self.lines[instance][0][0]

    def steps(self) -> list[Step]:
        """Every step line, ordered by time."""
        found = [
            Step(int(m[1]), instance, when)
            for instance, lines in self.lines.items()
            for when, text in lines
            if (m := STEP_LINE.match(text))
        ]
        return sorted(found, key=lambda s: s.time)

    def text(self) -> str:
        """Every line, by process, for the work directory."""
        return "".join(
            f"{instance} {when:.3f} {text}\n"
            for instance, lines in self.lines.items()
            for when, text in lines
        )


# Goodput -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Execution:
    """One execution of a step: the time it ended and how long it took."""

    step: int
    end: float
    seconds: float


def executions(steps: Sequence[Step]) -> list[Execution]:
    """Each step's execution, timed from its process's previous step (its first one:
    the run's median step)."""
    by_instance: dict[str, list[Step]] = {}
    for step in sorted(steps, key=lambda s: s.time):
        by_instance.setdefault(step.instance, []).append(step)
    deltas = [
        later.time - earlier.time
        for run in by_instance.values()
        for earlier, later in itertools.pairwise(run)
    ]
    typical = statistics.median(deltas) if deltas else 0.0
    found = []
    for run in by_instance.values():
        previous: Step | None = None
        for step in run:
            seconds = step.time - previous.time if previous else typical
            found.append(Execution(step.step, step.time, seconds))
            previous = step
    return sorted(found, key=lambda e: e.end)


@dataclass(frozen=True)
class Goodput:
    """The external measure of one run."""

    wall: float
    productive: float
    redone: int
    last_step: int | None

    @property
    def ratio(self) -> float:
        return self.productive / self.wall if self.wall > 0 else 0.0


def goodput(steps: Sequence[Step], created: float, end: float | None) -> Goodput:
    """Goodput of a job created at ``created``: ``end`` None when it finished (the wall
    ends at its last step), else the deadline."""
    runs = executions(steps)
    last: dict[int, Execution] = {}
    for run in runs:
        last[run.step] = run  # ordered by time: the last execution wins
    finish = end if end is not None else (runs[-1].end if runs else created)
    return Goodput(
        wall=finish - created,
        productive=sum(e.seconds for e in last.values()),
        redone=len(runs) - len(last),
        last_step=max(last) if last else None,
    )


@dataclass(frozen=True)
class Recovery:
    """What one fault cost: seconds from it to rank 0 training again (in a process
    started after it), and the steps that process trained again."""

    fault: Fault
    injected: float | None
    seconds: float | None
    redone: int | None
    note: str = ""


def recovery(fault: Fault, injected: float | None, log: RankLog, note: str = "") -> Recovery:
    """The first step after ``injected`` logged by a process that started after it."""
    if injected is None:
        return Recovery(fault, None, None, None, note or "not injected")
    steps = log.steps()
    before = [s.step for s in steps if s.time <= injected]
    after = [s for s in steps if s.time > injected and log.started(s.instance) > injected]
    if not after:
        return Recovery(fault, injected, None, None, note)
    first = after[0]
    redone = max(0, max(before) - first.step + 1) if before else 0
    return Recovery(fault, injected, first.time - injected, redone, note)


# The table -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemResult:
    """One system's run, or why it was not measured (``skipped``)."""

    system: str
    outcome: str = ""
    measure: Goodput | None = None
    recoveries: tuple[Recovery, ...] = ()
    own_goodput: str = "n/a"
    skipped: str = ""


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def table(results: Iterable[SystemResult]) -> str:
    """The report: one block per system."""
    out = []
    for result in results:
        out.append(f"== {result.system}")
        if result.skipped:
            out.append(f"   not measured: {result.skipped}")
            continue
        m = result.measure
        assert m is not None
        out.append(f"   outcome: {result.outcome}; last step logged {m.last_step}")
        out.append(
            f"   goodput {m.ratio:.3f} (productive {m.productive:.1f} s / wall {m.wall:.1f} s);"
            f" steps redone {m.redone}; the operator's own status.goodput: {result.own_goodput}"
        )
        for r in result.recoveries:
            at = "" if r.injected is None else f" at +{r.fault.at:.0f} s"
            redone = "" if r.redone is None else f", {r.redone} steps redone"
            note = f" ({r.note})" if r.note else ""
            out.append(
                f"   {FAULT_TITLES[r.fault.kind]}{at}: training again after "
                f"{_seconds(r.seconds)}{redone}{note}"
            )
    return "\n".join(out)
