"""Where a command's CPU goes: run it, sample /proc every second, and print the CPU seconds
each part of it spent (the set-up's Go tools one by one, each other set-up goal, each test
process with what it started) and how much of the machine stayed idle, minute by minute.

    python3 benchmarks/cpu_profile.py [--out FILE.json] [--interval S] -- COMMAND [ARG...]

Made for ``make test`` (``.ci/run``), whose parts run side by side: its per-step table
gives wall times, which on a saturated machine say how long a part waited as much as what
it cost. On two cores a cold run is bounded by the CPU its parts need, so the next cut is
the biggest CPU figure here. Standard library only: it runs before the venv exists.

How the seconds are counted: each live process's user and system time, with the time of
the children it has reaped (``/proc/PID/stat`` fields 14-17), is sampled; the growth of
that sum goes to the process's part, minus what its reaped children were already seen to
spend (and their own gone children, when a chain of processes ends between two samples),
so a short-lived process (one ``compile`` of a ``go build``) is counted through its
parent, and once. A part is named by the nearest ancestor that names one (``PARTS``); the
command's processes that name none are ``command``, and what runs beside the command (not
started by it) is ``outside the command``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
#: The command's processes that name no part, and those it did not start.
COMMAND, OUTSIDE = "command", "outside the command"
#: Parts inside which a process may name a part of its own.
TOP_PARTS = (COMMAND, "runner", "go lane")


@dataclass
class Proc:
    pid: int
    ppid: int
    own: float  # seconds: own user + system
    kids: float  # seconds: the user + system of the children it has reaped
    part: str

    @property
    def total(self) -> float:
        return self.own + self.kids


@dataclass
class Profile:
    """CPU seconds per part, and the machine's busy and idle seconds per minute."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    busy: list[float] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, reaped children's), or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return ppid, (utime + stime) / TICK, (cutime + cstime) / TICK


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return []
    return raw.split("\0")[:-1] if raw.endswith("\0") else raw.split("\0")


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


_JUNIT = re.compile(r"--junitxml=\S*/([\w.-]+)\.xml")
_TOOL_DIR = re.compile(r"cluster/tools/([\w.-]+)")


def name_part(pid: int, argv: list[str]) -> str | None:
    """The part a process starts, if it names one: a test process (by its junit file), a
    ``make`` goal of the set-up, a Go tool's build (by its module's directory)."""
    line = " ".join(argv)
    if not argv:
        return None
    if "tests.tiers" in line:
        return "runner"
    if Path(argv[0]).name == "make" and argv[-1] == "cluster-tools":
        return "go lane"
    junit = _JUNIT.search(line)
    if junit and "pytest" in line:
        return f"tests {junit.group(1)}"
    exe = Path(argv[0]).name
    if exe == "go" and len(argv) > 1 and argv[1] in ("build", "test", "install", "mod", "list"):
        tool = _TOOL_DIR.search(_cwd(pid))
        return f"go {tool.group(1)}" if tool else None
    if exe == "make" and "test-setup-goals" not in line:
        goals = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
        if goals and goals[-1] != "test":
            return f"setup {goals[-1]}"
    for tier in ("ruff", "mypy", "lint-imports"):
        if exe == tier:
            return f"lint {tier}"
    return None


class Sampler:
    """Samples every process; ``root`` is the command's pid (its tree's parts are named,
    everything else is :data:`OUTSIDE`)."""

    def __init__(self, root: int | None = None) -> None:
        self.root = root
        self.procs: dict[int, Proc] = {}
        self.profile = Profile()
        self._own: dict[int, str | None] = {}
        self._baseline_taken = False

    def _part(self, pid: int, ppid: int) -> str:
        parent = self.procs.get(ppid)
        inherited = parent.part if parent is not None else OUTSIDE
        if pid == self.root:
            inherited = COMMAND
        if inherited == OUTSIDE or inherited not in TOP_PARTS:
            return inherited  # a make or go inside a goal or a test stays that goal's
        if pid not in self._own:
            self._own[pid] = name_part(pid, _cmdline(pid))
        return self._own[pid] or inherited

    def sample(self) -> float:
        """One pass over /proc; returns the CPU seconds it attributed (none on the first
        pass, the baseline)."""
        seen: dict[int, tuple[int, float, float]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                stat = _stat(int(entry))
                if stat is not None:
                    seen[int(entry)] = stat
        # Children seen last time and gone now: what they spent was counted already and
        # shows again in their parent's reaped time. A gone process's own gone children
        # were counted too, and their time is in what its parent reaps from it.
        gone = {pid: proc for pid, proc in self.procs.items() if pid not in seen}
        gone_children: dict[int, list[int]] = defaultdict(list)
        for pid, proc in gone.items():
            gone_children[proc.ppid].append(pid)
        counted: dict[int, float] = {}

        def counted_for(pid: int) -> float:
            if pid not in counted:
                counted[pid] = gone[pid].total + sum(map(counted_for, gone_children[pid]))
            return counted[pid]

        reaped: dict[int, float] = defaultdict(float)
        reaped_part: dict[int, str] = {}  # what the unseen rest of a reaped child was
        for pid, proc in gone.items():
            reaped[proc.ppid] += counted_for(pid)
            reaped_part.setdefault(proc.ppid, proc.part)
            self._own.pop(pid, None)
        attributed = 0.0
        current: dict[int, Proc] = {}
        for pid in sorted(seen):  # parents (lower pids) first, as a rule
            ppid, own, kids = seen[pid]
            old = self.procs.get(pid)
            deltas: list[tuple[str, float]]
            if old is None:
                part = self._part(pid, ppid)
                # New since the last pass: all it spent so far is new (on the first pass,
                # what ran before is no one's).
                deltas = [(part, own + kids)] if self._baseline_taken else []
            else:
                part = old.part
                # What its reaped children spent after they were last seen is theirs (the
                # command's, when the profiler reaps it); children never seen are its own.
                deltas = [
                    (part, own - old.own),
                    (reaped_part.get(pid, part), kids - old.kids - reaped.get(pid, 0.0)),
                ]
            current[pid] = Proc(pid, ppid, own, kids, part)
            self.procs[pid] = current[pid]  # a child found later looks its parent up here
            for name, delta in deltas:
                if delta > 0:
                    self.profile.seconds[name] += delta
                    attributed += delta
        self.procs = current
        self._baseline_taken = True
        return attributed


def _machine() -> tuple[float, float]:
    """(busy, idle) seconds of every core since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / TICK, idle / TICK


def run(command: list[str], interval: float) -> tuple[int, Profile, float]:
    sampler = Sampler()
    sampler.sample()  # the baseline: what ran before is not the command's
    began = time.monotonic()
    child = subprocess.Popen(command)
    sampler.root = child.pid
    busy0, idle0 = _machine()
    minute_end = began + 60
    code: int | None = None
    while code is None:
        time.sleep(interval)
        code = child.poll()
        sampler.sample()
        now = time.monotonic()
        if now >= minute_end or code is not None:
            busy1, idle1 = _machine()
            sampler.profile.busy.append(busy1 - busy0)
            sampler.profile.idle.append(idle1 - idle0)
            busy0, idle0, minute_end = busy1, idle1, now + 60
    return code, sampler.profile, time.monotonic() - began


def report(profile: Profile, wall: float, top: int = 40) -> str:
    total = sum(profile.seconds.values())
    lines = [
        f"cpu_profile: {wall / 60:.1f} min wall, {total / 60:.1f} CPU-min attributed, "
        f"machine busy {sum(profile.busy) / 60:.1f} CPU-min, idle {sum(profile.idle) / 60:.1f}",
        f"{'CPU-min':>8}  {'share':>6}  part",
    ]
    for part, seconds in sorted(profile.seconds.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{seconds / 60:8.1f}  {seconds / max(total, 1e-9):6.1%}  {part}")
    lines.append("idle CPU-seconds per minute: " + " ".join(f"{s:.0f}" for s in profile.idle))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run is expected after --, e.g. -- bash .ci/run")
    if args.interval <= 0:
        parser.error(f"--interval must be above 0 seconds, got {args.interval}")
    code, profile, wall = run(command, args.interval)
    text = report(profile, wall)
    print(text, file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "wall_s": wall,
                    "cpu_s": dict(profile.seconds),
                    "busy_s_per_minute": profile.busy,
                    "idle_s_per_minute": profile.idle,
                },
                indent=1,
            )
        )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
