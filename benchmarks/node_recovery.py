"""How fast a job leaves a failed node, on kwok's fake GPU nodes:
``python -m benchmarks.node_recovery`` (or ``make bench-node-recovery``).

On a control plane of its own, with the kubetrain operator as its own process
(``--node-lost-grace-seconds`` as given, ``--force-delete-lost-pods=true``), each trial
makes a 2-pod PyTorchJob (Master + Worker, one GPU each) on a pool of two fresh 8-GPU
nodes of its own, waits until it runs, then fails the Master's node one way:

- ``notready``: the node's kubelet gone (kwok stops reporting it, ``Ready=False``, the pods
  there never confirm their deletion) and the node cordoned;
- ``deleted``: the Node object deleted;
- ``unhealthy``: NVSentinel's ``SysLogsXIDError=True`` set on it, and the node cordoned.

The figure is the time from that change to every pod of the job's next attempt Running
on the other node, as this process sees it (polling every 0.1 s): for ``notready`` it
includes the grace. Each kind of failure runs ``--trials`` times; p50 and max are
printed. Figures to compare, never assertions.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config

from benchmarks.operator_scale import NAMESPACE, operator_command, prepare
from cluster.local import LocalCluster
from cluster.process import free_port
from kubetrain.api import keys as K
from kubetrain.api.crds import all_crds
from kubetrain.controller.kube import KubeApi
from tests.integration.operator.jobs import Jobs, pytorch_job
from tests.integration.operator.lost_nodes import (
    create_nodes,
    delete_node,
    make_lost,
    make_unhealthy,
    node_of,
    pinned,
    pool,
    remove_pools,
)

SIGNALS: dict[str, Callable[[client.CoreV1Api, str], None]] = {
    "notready": make_lost,
    "deleted": delete_node,
    "unhealthy": make_unhealthy,
}


def running(jobs: Jobs, name: str, attempt: int, timeout: float) -> dict[str, dict[str, Any]]:
    """The job's pods once both are of ``attempt`` and Running (0.1 s polls)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = jobs.pods(name)
        if len(pods) == 2 and all(
            p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["labels"].get(K.ATTEMPT_LABEL, "0") == str(attempt)
            for p in pods.values()
        ):
            return pods
        time.sleep(0.1)
    raise SystemExit(f"{name}: attempt {attempt} not Running within {timeout:.0f} s")


def trial(jobs: Jobs, signal: str, index: int, ordinal: int) -> float:
    """One failure of ``signal``: seconds from the change to the gang Running elsewhere."""
    name = f"{signal[:5]}-{index}"
    create_nodes(jobs.core, pool(name, ordinal, count=2))
    job = pytorch_job(name, workers=1)
    job["metadata"]["namespace"] = NAMESPACE
    jobs.create(pinned(job, name))
    try:
        pods = running(jobs, name, 0, 60)
        node = node_of(pods)
        started = time.monotonic()
        SIGNALS[signal](jobs.core, node)
        after = running(jobs, name, 1, 180)
        took = time.monotonic() - started
        elsewhere = {p["spec"]["nodeName"] for p in after.values()}
        if node in elsewhere:
            raise SystemExit(f"{name}: attempt 1 landed on the failed node {node}")
        return took
    finally:
        jobs.delete("PyTorchJob", name)
        remove_pools(jobs, [name])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="failures of each kind")
    parser.add_argument(
        "--grace", type=int, default=5, help="the operator's --node-lost-grace-seconds"
    )
    parser.add_argument(
        "--signals", default=",".join(SIGNALS), help=f"which ({', '.join(SIGNALS)})"
    )
    args = parser.parse_args(argv)
    signals = [s for s in args.signals.split(",") if s]
    unknown = sorted(set(signals) - set(SIGNALS))
    if unknown or args.trials < 1 or args.grace < 0:
        raise SystemExit(
            f"--signals ({args.signals}) must name {', '.join(SIGNALS)}; --trials >= 1 "
            f"({args.trials}); --grace >= 0 ({args.grace})"
        )
    print(f"machine: {platform.node()} {platform.machine()}, python {platform.python_version()}")
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-bench-nodes-"))
    cluster = LocalCluster(workdir / "cluster")
    operator: subprocess.Popen[bytes] | None = None
    try:
        cluster.up(timeout=300)
        kube = KubeApi.connect(str(cluster.kubeconfig), qps=100, burst=200)
        prepare(kube, all_crds())
        settings = argparse.Namespace(workers=2, qps=100, burst=200)
        command = operator_command(
            cluster.kubeconfig,
            settings,
            metrics_port=free_port(),
            health_port=free_port(),
            extra=(f"--node-lost-grace-seconds={args.grace}", "--force-delete-lost-pods=true"),
        )
        log_path = workdir / "operator.log"
        operator = subprocess.Popen(command, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
        api_client: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            str(cluster.kubeconfig)
        )
        jobs = Jobs(api_client, NAMESPACE)
        print(f"grace {args.grace} s, force deletion on; {args.trials} trials each")
        print(f"{'failure':<10} {'p50 (s)':>8} {'max (s)':>8}  every trial (s)")
        ordinal = 0
        for signal in signals:
            times = []
            for index in range(args.trials):
                times.append(trial(jobs, signal, index, ordinal))
                ordinal += 1
            spread = " ".join(f"{t:.1f}" for t in times)
            print(
                f"{signal:<10} {statistics.median(times):>8.1f} {max(times):>8.1f}  {spread}",
                flush=True,
            )
        return 0
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(timeout=30)
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
