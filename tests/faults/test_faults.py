"""Fault injection against a real control plane and real operator processes, bounded in
time and printing its figures (see the run's summary): the operator killed (SIGKILL) at
random moments during a mixed burst. Afterwards every job Succeeded with the right status
(one restart for one OOM kill), and no child was made twice (``burst.check_outcome``).

The API-server restart and paused-leader tests are in ``unfinished_faults.py`` (not
collected): see its docstring for why.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

from cluster.local import LocalCluster
from tests.faults.burst import BurstJob, check_outcome, drive, mixed_burst
from tests.integration.operator.jobs import Jobs
from tests.integration.operator.process import OperatorProcess

#: Jobs of each kind in a burst (three kinds).
EACH = 4


def _submit(jobs: Jobs, prefix: str) -> list[BurstJob]:
    burst = mixed_burst(prefix, EACH)
    for _job, body in burst:
        jobs.create(body)
    return [job for job, _body in burst]


def test_operator_killed_at_random_moments_during_a_mixed_burst(
    faults_cluster: LocalCluster,
    faults_namespace: str,
    jobs: Jobs,
    processes: list[OperatorProcess],
    tmp_path: Path,
    figures: list[str],
) -> None:
    seed = int(os.environ.get("KUBETRAIN_FAULT_SEED") or time.time_ns() % 100_000)
    rng = random.Random(seed)
    log = tmp_path / "operator.log"

    def start() -> OperatorProcess:
        proc = OperatorProcess(faults_cluster.kubeconfig, faults_namespace, log).start()
        processes.append(proc)
        return proc

    current = [start()]
    done = threading.Event()
    kills: list[float] = []

    def killer() -> None:
        # Kills at random moments until the burst is over (at most 8), each followed by a
        # new operator after a random pause.
        while len(kills) < 8 and not done.wait(rng.uniform(1.0, 5.0)):
            current[0].kill()
            kills.append(time.monotonic())
            time.sleep(rng.uniform(0.0, 2.0))
            current[0] = start()

    thread = threading.Thread(target=killer, daemon=True)
    burst = _submit(jobs, "kill")
    thread.start()
    try:
        took = drive(jobs, burst)
    finally:
        done.set()
        thread.join(timeout=30)
    check_outcome(jobs, burst)
    figures.append(
        f"faults: operator SIGKILLed {len(kills)} times at random (seed {seed}) during a "
        f"burst of {len(burst)} jobs: all Succeeded in {took:.0f} s, no child made twice, "
        f"{EACH} OOM kills counted once each"
    )
