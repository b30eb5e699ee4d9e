"""What one ``/metrics`` scrape costs the operator as the cluster grows.

The job gauges (``kubetrain_jobs``, the oldest wait, GPUs held, progress staleness) are
computed from the operator's caches at scrape time, one pass over the cached jobs and
their pods. This measures that pass and the whole exposition (``generate_latest`` of the
operator's registry) over caches of 150 to 5,000 jobs of every kind and state with five
pods each, as the informers keep them: CPU milliseconds per scrape (median of 20), the
exposition's size and its series count. No control plane is needed: the caches are the
same objects the informers hold (``controller/trim.py``), read through the real status
codecs.

    .venv/bin/python -m benchmarks.metrics_scrape [--jobs 150,1000,5000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import generate_latest

from kubetrain.api import keys as K
from kubetrain.api.common import JobStatus
from kubetrain.controller.job_metrics import ClusterCollector
from kubetrain.controller.metrics import Metrics
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.trim import trim_pod

KINDS = ("PyTorchJob", "TFJob", "MPIJob", "TrainJob")
PLUGINS = build_registry(KINDS)
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
#: Condition sets cycled through: a realistic mix of states.
STATES = (
    [("Created", "True"), ("Running", "True")],
    [("Created", "True"), ("Running", "True")],
    [("Created", "True"), ("Running", "True")],
    [("Created", "True")],
    [("Created", "True"), ("Suspended", "True")],
    [("Created", "True"), ("Running", "False"), ("Succeeded", "True")],
    [("Created", "True"), ("Running", "False"), ("Failed", "True")],
    [("Created", "True"), ("Running", "False"), ("Restarting", "True")],
)


def _stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _job(index: int) -> tuple[str, dict[str, Any]]:
    kind = KINDS[index % len(KINDS)]
    conditions = [
        {"type": t, "status": s, "lastTransitionTime": _stamp(60)}
        for t, s in STATES[index % len(STATES)]
    ]
    labels = {K.KUEUE_QUEUE_NAME_LABEL: f"team-{index % 4}"} if index % 3 == 0 else {}
    meta = {
        "name": f"job-{index}",
        "namespace": f"team-{index % 8}",
        "uid": f"uid-{index}",
        "creationTimestamp": _stamp(600 + index),
        "labels": labels,
    }
    status: dict[str, Any] = {"conditions": conditions}
    if kind == "TrainJob":
        status = {
            "kubetrain": {"conditions": conditions},
            "trainerStatus": {"progressPercentage": 50, "lastUpdatedTime": _stamp(30)},
        }
    return kind, {"kind": kind, "metadata": meta, "status": status}


def _pod(index: int, replica: int) -> dict[str, Any]:
    return trim_pod(
        {
            "metadata": {"name": f"job-{index}-worker-{replica}", "namespace": "ns"},
            "spec": {
                "containers": [
                    {"name": "main", "resources": {"limits": {K.GPU_RESOURCE: "8", "cpu": "90"}}}
                ],
                "nodeSelector": {K.GPU_POOL_LABEL: f"pool-{index % 2}"},
            },
            "status": {"phase": "Running"},
        }
    )


class Caches:
    """The operator's caches, filled with ``count`` jobs of five pods each."""

    def __init__(self, count: int) -> None:
        self.jobs = [_job(i) for i in range(count)]
        self.pods = {f"job-{i}": [_pod(i, r) for r in range(5)] for i in range(count)}

    def cached_jobs(self) -> Iterable[tuple[str, Mapping[str, Any]]]:
        return self.jobs

    def status_of(self, kind: str, raw: Mapping[str, Any]) -> JobStatus:
        return PLUGINS[kind].status_codec.read(raw.get("status"))

    def pods_of(self, kind: str, raw: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
        return self.pods[raw["metadata"]["name"]]

    def api_requests(self) -> Mapping[tuple[str, str], int]:
        return {("patch", "200"): 1000, ("create", "201"): 500, ("get", "404"): 3}

    def watch_restarts(self) -> Mapping[tuple[str, str], int]:
        return {("pods", "error"): 0, ("pods", "expired"): 1}


def measure(count: int, repeats: int = 20) -> tuple[float, int, int]:
    """(median CPU ms per scrape, exposition bytes, sample lines) at ``count`` jobs."""
    metrics = Metrics(kinds=KINDS)
    metrics.registry.register(ClusterCollector(Caches(count), clock=lambda: NOW))
    times = []
    body = b""
    for _ in range(repeats):
        start = time.process_time()
        body = generate_latest(metrics.registry)
        times.append((time.process_time() - start) * 1000)
    lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    return statistics.median(times), len(body), len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs", default="150,1000,5000", help="comma-separated job counts (default %(default)s)"
    )
    args = parser.parse_args(argv)
    try:
        counts = [int(c) for c in args.jobs.split(",")]
    except ValueError:
        parser.error(f"--jobs ({args.jobs!r}) must be comma-separated whole numbers, e.g. 150,1000")
    if any(c < 1 for c in counts):
        parser.error(f"--jobs ({args.jobs!r}) must be at least 1 each")
    header = ("jobs", "pods", "CPU ms/scrape", "per job µs", "bytes", "series")
    print("{:>6} {:>7} {:>14} {:>11} {:>8} {:>7}".format(*header))
    for count in counts:
        ms, size, series = measure(count)
        per_job = ms * 1000 / count
        print(f"{count:>6} {count * 5:>7} {ms:>14.1f} {per_job:>11.1f} {size:>8} {series:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
