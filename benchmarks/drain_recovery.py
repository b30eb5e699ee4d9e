"""How fast a drained job trains again on the real node: ``python -m
benchmarks.drain_recovery`` (or ``make bench-drain-recovery``; needs what ``make
test-realnode`` needs: the images built, the real node's packages).

It runs ``tests/realnode/test_training_drain.py`` with ``KUBETRAIN_DRAIN_TRIALS`` drains in a
row: each under a 2-pod PyTorchJob of real torch.distributed ranks (the ``local`` stack's
sample, checkpointing every 5 steps and on SIGTERM) and a 2-node TrainJob submitted with
the Kubeflow SDK running the same trainer, ``kubectl drain`` of the real node under
both, their new gangs Pending while the node is cordoned, then ``kubectl uncordon``;
every trial is checked as the test checks one. Printed per trial and as p50 and max:

- PyTorchJob, eviction -> new gang Pending: from the start of ``kubectl drain`` to the
  job's next attempt created and waiting (the operator's reaction; the drain's own
  eviction and the pods' termination, a checkpoint included);
- PyTorchJob and TrainJob, uncordon -> training again: from ``kubectl uncordon`` to the
  first step the resumed rank 0 logs (scheduling, the container start, torch's
  rendezvous and the checkpoint load).

With ``--evictions N`` it also runs ``tests/realnode/test_training_signals.py`` N times: a
PyTorchJob's worker container killed by SIGKILL (the program's failure), then a pod of
the next attempt evicted through the Eviction API on the uncordoned node; printed: from
each to the resumed master's first step.

Figures to compare, never assertions.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

#: What each test prints per trial, and the figures' names.
DRAIN = (
    "tests/realnode/test_training_drain.py",
    "KUBETRAIN_DRAIN_TRIALS",
    re.compile(
        r"drain trial \d+: PyTorchJob: eviction -> new gang Pending ([\d.]+) s; "
        r"uncordon -> training again ([\d.]+) s; TrainJob: uncordon -> training again "
        r"([\d.]+) s"
    ),
    (
        "PyTorchJob: eviction -> new gang Pending",
        "PyTorchJob: uncordon -> training again",
        "TrainJob: uncordon -> training again",
    ),
)
EVICTION = (
    "tests/realnode/test_training_signals.py",
    "KUBETRAIN_EVICTION_TRIALS",
    re.compile(
        r"signal trial \d+: SIGKILL -> training again ([\d.]+) s; "
        r"eviction -> training again ([\d.]+) s"
    ),
    ("container SIGKILL -> training again", "eviction -> training again"),
)


def run(
    test: str, variable: str, line: re.Pattern[str], labels: tuple[str, ...], trials: int
) -> None:
    """Run ``test`` with ``trials`` trials; print each trial's figures, then p50 and max."""
    command = [
        *(sys.executable, "-m", "pytest", test),
        *("--tier=realnode", "--profile=realnode", "-s", "-q", "-p", "no:cacheprovider"),
    ]
    env = {**os.environ, variable: str(trials)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    found = [tuple(float(v) for v in values) for values in line.findall(done.stdout)]
    for index, figures in enumerate(found, 1):
        named = zip(labels, figures, strict=True)
        print(f"trial {index}: " + "; ".join(f"{k} {v:.1f} s" for k, v in named))
    if done.returncode != 0 or len(found) != trials:
        print(done.stdout[-5000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"{test} failed (exit {done.returncode}) after {len(found)} trials")
    for column, label in enumerate(labels):
        values = [figures[column] for figures in found]
        print(f"{label}: p50 {statistics.median(values):.1f} s, max {max(values):.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="drains in a row (0: none)")
    parser.add_argument(
        "--evictions", type=int, default=0, help="kill-then-evict trials in a row (0: none)"
    )
    args = parser.parse_args(argv)
    for option, value in (("--trials", args.trials), ("--evictions", args.evictions)):
        if value < 0:
            raise SystemExit(f"{option} ({value}) must be at least 0")
    if not args.trials and not args.evictions:
        raise SystemExit("--trials and --evictions are both 0: nothing to measure")
    if args.trials:
        run(*DRAIN, args.trials)
    if args.evictions:
        run(*EVICTION, args.evictions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
