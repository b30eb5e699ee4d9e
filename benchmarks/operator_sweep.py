"""How the operator's cost grows with the number of jobs: the operator_scale burst at
several sizes on one control plane with many fake GPU nodes.

One control plane (``--gpu-nodes``, default 700, ``--gpus-per-node``, default 32: room for
the 19,000 pods of 5,000 jobs, a GPU each) runs, for each size of the sweep (default 150,
1,000 and 5,000 jobs), a fresh ``kubetrain operator`` process and a
burst of that many jobs in operator_scale's mix (40 % PyTorchJobs of Master + 3 Workers,
20 % MPIJobs of launcher + 2 workers, 40 % TrainJobs of 4 nodes: 3.8 pods per job),
then deletes them. Per size: create -> first child (a reconcile starved behind the burst
shows in its p99), create -> all children and create -> Running (p50/p99), the
wall time until every job runs, the operator's CPU seconds and peak RSS, its reconciles
(count, mean wall time inside one, CPU per reconcile) and API requests, and the CPU the
API server, etcd, kube-scheduler and kwok spent meanwhile, which says where the time
went: an operator whose CPU is a small share of the wall time while kube-apiserver is busy
waits on the control plane; one near a core is its own bottleneck.

    .venv/bin/python -m benchmarks.operator_sweep            # or: make bench-scale
    .venv/bin/python -m benchmarks.operator_sweep --sizes 150,1000 --gpu-nodes 500 --gpus-per-node 8

Figures to compare, never assertions.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from benchmarks.operator_scale import (
    CRDS,
    NAMESPACE,
    NAMESPACES,
    JobTimes,
    Observer,
    operator_command,
    percentile,
    process_stats,
    runtime,
    submit,
    wait_ready,
)
from cluster.local import LocalCluster
from cluster.process import free_port
from cluster.topology import default_topology
from kubetrain.api.crds import all_crds
from kubetrain.controller.kube import RUNTIME_RESOURCES, KubeApi


@dataclass
class SizeResult:
    jobs: int
    pods: int
    running: int
    first_child_p50: float
    first_child_p99: float
    children_p50: float
    children_p99: float
    running_p50: float
    running_p99: float
    wall: float
    cpu: float
    peak_rss_mib: float
    reconciles: float
    reconcile_mean_ms: float
    api_requests: float
    apiserver_cpu: float
    etcd_cpu: float
    scheduler_cpu: float
    kwok_cpu: float


def mix(total: int) -> list[tuple[str, str]]:
    """``total`` jobs in operator_scale's proportions, the kinds interleaved."""
    pytorch, mpi = round(total * 0.4), round(total * 0.2)
    names = [("PyTorchJob", f"pt-{i:04d}") for i in range(pytorch)]
    names += [("MPIJob", f"mpi-{i:04d}") for i in range(mpi)]
    names += [("TrainJob", f"tj-{i:04d}") for i in range(total - pytorch - mpi)]
    names.sort(key=lambda kn: kn[1].split("-")[1] + kn[0])
    return names


def pods_of(kind: str) -> int:
    return {"PyTorchJob": 4, "MPIJob": 3, "TrainJob": 4}[kind]


def metrics(port: int) -> tuple[float, float, float]:
    """Reconciles, their total seconds, and API requests from the operator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return parse_metrics(resp.read().decode())


def parse_metrics(text: str) -> tuple[float, float, float]:
    """Reconciles (every kind and result), their total seconds, and API requests (every
    verb and code) in an exposition of the operator's metrics."""
    count = total = requests = 0.0
    for line in text.splitlines():
        if line.startswith("kubetrain_api_requests_total{"):
            requests += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kubetrain_reconcile_duration_seconds_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kubetrain_reconcile_duration_seconds_count"):
            count += float(line.rsplit(" ", 1)[1])
    return count, total, requests


#: The control plane's processes whose CPU each size reports.
COMPONENTS = ("kube-apiserver", "etcd", "kube-scheduler", "kwok-controller")


def component_cpu(cluster: LocalCluster, name: str) -> float:
    pid = cluster.pids().get(name)
    return process_stats(pid)[0] if pid else float("nan")


def run_size(
    cluster: LocalCluster, api: KubeApi, args: argparse.Namespace, total: int, workdir: Path
) -> SizeResult:
    api.delete(NAMESPACES, None, NAMESPACE)
    while api.get(NAMESPACES, None, NAMESPACE) is not None:
        time.sleep(0.5)
    api.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        resource=NAMESPACES,
    )
    wait_ready(api)
    metrics_port = free_port()
    operator = subprocess.Popen(
        operator_command(
            cluster.kubeconfig,
            args,
            metrics_port=metrics_port,
            health_port=free_port(),
            extra=(f"--startup-timeout-seconds={args.startup_timeout}",),
        ),
        stdout=(workdir / f"operator-{total}.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        before = None
        for _ in range(120):  # until it serves /metrics (started, informers listing)
            time.sleep(0.5)
            if operator.poll() is not None:
                raise SystemExit((workdir / f"operator-{total}.log").read_text())
            try:
                before = metrics(metrics_port)
                break
            except OSError:
                continue
        if before is None:
            raise SystemExit(f"the operator served no /metrics on port {metrics_port} in 60s")
        time.sleep(2)
        cpu_before, _ = process_stats(operator.pid)
        before_cpu = {name: component_cpu(cluster, name) for name in COMPONENTS}
        names = mix(total)
        times = {name: JobTimes(kind) for kind, name in names}
        observer = Observer(api, times)
        observer.start()
        began = time.monotonic()
        submit(api, names, times, threads=args.submitters)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            with observer.lock:
                if all(t.running_at is not None for t in times.values()):
                    break
            time.sleep(0.5)
        wall = time.monotonic() - began
        cpu_after, peak_rss = process_stats(operator.pid)
        after = metrics(metrics_port)
        spent = {name: component_cpu(cluster, name) - before_cpu[name] for name in COMPONENTS}
        observer.stop.set()
    finally:
        operator.terminate()
        operator.wait(timeout=60)
    values = list(times.values())
    first = [t.first_child_at - t.submitted for t in values if t.first_child_at]
    children = [t.children_at - t.submitted for t in values if t.children_at]
    running = [t.running_at - t.submitted for t in values if t.running_at]
    reconciles = after[0] - before[0]
    return SizeResult(
        jobs=total,
        pods=sum(pods_of(kind) for kind, _ in names),
        running=len(running),
        first_child_p50=percentile(first, 50),
        first_child_p99=percentile(first, 99),
        children_p50=percentile(children, 50),
        children_p99=percentile(children, 99),
        running_p50=percentile(running, 50),
        running_p99=percentile(running, 99),
        wall=wall,
        cpu=cpu_after - cpu_before,
        peak_rss_mib=peak_rss,
        reconciles=reconciles,
        reconcile_mean_ms=(after[1] - before[1]) / reconciles * 1000 if reconciles else 0.0,
        api_requests=after[2] - before[2],
        apiserver_cpu=spent["kube-apiserver"],
        etcd_cpu=spent["etcd"],
        scheduler_cpu=spent["kube-scheduler"],
        kwok_cpu=spent["kwok-controller"],
    )


def report(args: argparse.Namespace, results: list[SizeResult]) -> None:
    print(
        f"\noperator --workers={args.workers} --kube-api-qps={args.qps:g} "
        f"--kube-api-burst={args.burst}; {args.gpu_nodes} fake GPU nodes of "
        f"{args.gpus_per_node} GPUs; each size a fresh operator and namespace"
    )
    header = (
        f"{'jobs':>6}{'pods':>6}{'Running':>8}{'1st child p50':>14}{'p99':>7}"
        f"{'children p50':>13}{'p99':>7}"
        f"{'Running p50':>12}{'p99':>7}{'wall':>7}{'CPU':>7}{'CPU/job':>9}{'RSS':>7}"
        f"{'recs':>7}{'rec ms':>7}{'CPU/rec':>8}{'req/job':>8}{'apiserver':>10}{'etcd':>6}"
        f"{'sched':>7}{'kwok':>6}"
    )
    print(header)
    for r in results:
        per_rec = r.cpu / r.reconciles * 1000 if r.reconciles else float("nan")
        print(
            f"{r.jobs:>6}{r.pods:>6}{r.running:>8}"
            f"{r.first_child_p50:>13.1f}s{r.first_child_p99:>6.1f}s"
            f"{r.children_p50:>12.1f}s{r.children_p99:>6.1f}s"
            f"{r.running_p50:>11.1f}s{r.running_p99:>6.1f}s{r.wall:>6.0f}s{r.cpu:>6.1f}s"
            f"{r.cpu / r.jobs * 1000:>7.0f}ms{r.peak_rss_mib:>5.0f}Mi{r.reconciles:>7.0f}"
            f"{r.reconcile_mean_ms:>7.0f}{per_rec:>6.1f}ms{r.api_requests / r.jobs:>8.1f}"
            f"{r.apiserver_cpu:>9.0f}s{r.etcd_cpu:>5.0f}s{r.scheduler_cpu:>6.0f}s{r.kwok_cpu:>5.0f}s"
        )
    print(
        "CPU: the operator's user + system seconds over the burst; rec ms: mean wall time "
        "inside one reconcile (API waits included); CPU/rec: operator CPU per reconcile; "
        "apiserver, etcd, sched (kube-scheduler), kwok (kwok-controller): their CPU seconds "
        "over the same burst; the busiest one is the bottleneck"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.operator_sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default="150,1000,5000", help="jobs per burst")
    # 5,000 jobs are about 19,000 pods of a GPU each: 700 nodes of 32 GPUs hold them.
    parser.add_argument("--gpu-nodes", type=int, default=700)
    parser.add_argument("--gpus-per-node", type=int, default=32)
    parser.add_argument("--workers", type=int, default=16, help="operator --workers")
    parser.add_argument("--qps", type=float, default=500, help="operator --kube-api-qps")
    parser.add_argument("--burst", type=int, default=1000, help="operator --kube-api-burst")
    parser.add_argument("--submitters", type=int, default=4, help="threads creating the jobs")
    parser.add_argument("--timeout", type=float, default=2400, help="seconds to wait per size")
    # At 5,000 jobs the 2-core control plane takes over 600 s (the operator's default) to
    # schedule some masters: 284 PyTorchJobs failed with StartupTimeout at the default.
    parser.add_argument(
        "--startup-timeout", type=int, default=3600, help="operator --startup-timeout-seconds"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not sizes or min(sizes) < 1:
        parser.error(f"--sizes {args.sizes!r}: expected positive job counts, e.g. 150,1000")

    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-sweep-"))
    cluster = LocalCluster(
        workdir / "cluster",
        topology=default_topology(
            cpu_nodes=2, gpu_nodes=args.gpu_nodes, gpus_per_node=args.gpus_per_node
        ),
    )
    try:
        started = time.monotonic()
        cluster.up(timeout=600)
        took = time.monotonic() - started
        print(f"control plane with {args.gpu_nodes} GPU nodes up in {took:.0f}s", flush=True)
        api = KubeApi.connect(str(cluster.kubeconfig), qps=1000, burst=2000)
        api.user_agent = "kubetrain-bench/sweep"
        for crd in all_crds():
            api.apply(crd, resource=CRDS)
        api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            resource=NAMESPACES,
        )
        wait_ready(api)
        api.apply(runtime(), resource=RUNTIME_RESOURCES["ClusterTrainingRuntime"])
        results = []
        for total in sizes:
            result = run_size(cluster, api, args, total, workdir)
            results.append(result)
            print(
                f"  {total} jobs: {result.running} Running in {result.wall:.0f}s, operator CPU "
                f"{result.cpu:.1f}s, RSS {result.peak_rss_mib:.0f} MiB",
                flush=True,
            )
        report(args, results)
        return 0
    finally:
        cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
