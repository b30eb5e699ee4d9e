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

Figures to compare, never assertions.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

TRIAL = re.compile(
    r"drain trial \d+: PyTorchJob: eviction -> new gang Pending ([\d.]+) s; "
    r"uncordon -> training again ([\d.]+) s; TrainJob: uncordon -> training again ([\d.]+) s"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="drains in a row")
    args = parser.parse_args(argv)
    if args.trials < 1:
        raise SystemExit(f"--trials ({args.trials}) must be at least 1")
    command = [
        *(sys.executable, "-m", "pytest", "tests/realnode/test_training_drain.py"),
        *("--tier=realnode", "--profile=realnode", "-s", "-q", "-p", "no:cacheprovider"),
    ]
    env = {**os.environ, "KUBETRAIN_DRAIN_TRIALS": str(args.trials)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    found = [(float(a), float(b), float(c)) for a, b, c in TRIAL.findall(done.stdout)]
    for index, (pending, training, trainjob) in enumerate(found, 1):
        print(
            f"trial {index}: PyTorchJob eviction -> Pending {pending:.1f} s, "
            f"uncordon -> training {training:.1f} s; TrainJob uncordon -> training "
            f"{trainjob:.1f} s"
        )
    if done.returncode != 0 or len(found) != args.trials:
        print(done.stdout[-5000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(
            f"the drain test failed (exit {done.returncode}) after {len(found)} trials"
        )
    for label, values in (
        ("PyTorchJob: eviction -> new gang Pending", [f[0] for f in found]),
        ("PyTorchJob: uncordon -> training again", [f[1] for f in found]),
        ("TrainJob: uncordon -> training again", [f[2] for f in found]),
    ):
        print(f"{label}: p50 {statistics.median(values):.1f} s, max {max(values):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
