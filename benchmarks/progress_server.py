"""What the progress server costs: ``python -m benchmarks.progress_server``.

On a control plane of its own (kwok's fake GPU nodes), the operator runs as a process
watching one namespace, ``--jobs`` one-node TrainJobs start, and each pod's token comes
from the TokenRequest API, bound to the pod and for its TrainJob's audience (what the
kubelet gives it). Then:

1. **first reports**: each pod reports once (a TokenReview and a pod read each, then the
   write);
2. **steady load**: ``--clients`` threads, each over one kept-alive HTTPS connection as
   the SDK's ``requests`` session keeps, report as fast as the server answers for
   ``--seconds``, spread over the TrainJobs so that no job passes its own limit (5 a
   second).

Printed: reports per second written, latency percentiles, answers by code, the operator's
CPU seconds per written report (its CPU over the phase minus its idle CPU over as long,
divided by the reports), and the API server's CPU per report (each report is one
server-side apply of ``status.trainerStatus``). Everything runs on this machine's cores:
the figures are what one machine serves, API server included.
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from benchmarks.operator_scale import NAMESPACE, percentile, prepare, process_stats, trainjob
from cluster.local import LocalCluster
from cluster.process import free_port
from cluster.topology import default_topology
from kubetrain.api.crds import all_crds
from kubetrain.api.progress import token_audience
from kubetrain.controller.kube import JOB_RESOURCES, PODS, SECRETS, KubeApi


def pod_token(api: KubeApi, pod: dict[str, Any], job: str) -> str:
    meta = pod["metadata"]
    answer = api.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [token_audience(NAMESPACE, job)],
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        },
    )
    return str(answer["status"]["token"])


def report(progress: int) -> dict[str, Any]:
    return {
        "trainerStatus": {
            "progressPercentage": progress % 101,
            "estimatedRemainingSeconds": 600,
            "metrics": [{"name": "loss", "value": f"{1 / (progress + 1):.4f}"}],
            "lastUpdatedTime": datetime.now(UTC).isoformat(),
        }
    }


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.codes: dict[int, int] = {}
        self.latencies: list[float] = []

    def add(self, code: int, seconds: float) -> None:
        with self.lock:
            self.codes[code] = self.codes.get(code, 0) + 1
            self.latencies.append(seconds)


def send(
    session: requests.Session, url: str, ca: Path, token: str, progress: int, tally: Tally
) -> None:
    """One report over ``session``, its answer and latency counted in ``tally``."""
    started = time.monotonic()
    answer = session.post(
        url,
        json=report(progress),
        headers={"Authorization": f"Bearer {token}"},
        verify=str(ca),
        timeout=10,
    )
    tally.add(answer.status_code, time.monotonic() - started)


def cpu_of(pid: int) -> float:
    return process_stats(pid)[0]


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-progress-bench-"))
    cluster = LocalCluster(
        workdir / "cluster", topology=default_topology(cpu_nodes=1, gpu_nodes=4, gpus_per_node=64)
    )
    operator: subprocess.Popen[bytes] | None = None
    try:
        cluster.up(timeout=300)
        api = KubeApi.connect(str(cluster.kubeconfig), qps=1000, burst=2000)
        prepare(api, all_crds())
        port = free_port()
        log = workdir / "operator.log"
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubetrain.commands.operator",
                f"--kubeconfig={cluster.kubeconfig}",
                f"--namespace={NAMESPACE}",
                "--kinds=TrainJob",
                f"--metrics-port={free_port()}",
                "--metrics-bind-address=127.0.0.1",
                f"--health-port={free_port()}",
                "--health-bind-address=127.0.0.1",
                f"--progress-port={port}",
                "--progress-bind-address=127.0.0.1",
                "--progress-host=127.0.0.1",
                f"--progress-api-qps={args.api_qps:g}",
                f"--progress-api-burst={max(1, int(args.api_qps * 2))}",
                "--log-level=warning",
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "POD_NAMESPACE": NAMESPACE},
        )
        names = [f"tj-{i:03d}" for i in range(args.jobs)]
        for name in names:
            api.create(trainjob(name, nodes=1), resource=JOB_RESOURCES["TrainJob"])
        pods: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 180
        while len(pods) < len(names) and time.monotonic() < deadline:
            if operator.poll() is not None:
                print(log.read_text()[-3000:], file=sys.stderr)
                return 1
            listed, _ = api.list(PODS, NAMESPACE)
            pods = {
                p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"]: p
                for p in listed
                if (p.get("status") or {}).get("phase") == "Running"
            }
            time.sleep(1)
        if len(pods) < len(names):
            print(f"only {len(pods)} of {len(names)} pods ran in 180s", file=sys.stderr)
            return 1
        secret = api.get(SECRETS, NAMESPACE, "kubetrain-progress-tls")
        assert secret is not None
        ca = workdir / "ca.crt"
        ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
        tokens = {name: pod_token(api, pods[name], name) for name in names}
        url = f"https://127.0.0.1:{port}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}"
        print(f"{args.jobs} TrainJobs running; operator pid {operator.pid}")

        time.sleep(3)
        idle_start = cpu_of(operator.pid)
        time.sleep(args.seconds)
        idle_per_second = (cpu_of(operator.pid) - idle_start) / args.seconds
        print(f"idle operator: {idle_per_second * 1000:.1f} ms CPU per second")

        first = Tally()
        cpu = cpu_of(operator.pid)
        began = time.monotonic()
        with requests.Session() as session:
            for i, name in enumerate(names):
                send(session, f"{url}/trainjobs/{name}/status", ca, tokens[name], i, first)
        took = time.monotonic() - began
        spent = cpu_of(operator.pid) - cpu - idle_per_second * took
        summarize("first reports (TokenReview + pod read + write)", first, took, spent)

        steady = Tally()
        stop = threading.Event()

        def client(index: int) -> None:
            mine = names[index :: args.clients]
            with requests.Session() as session:
                count = 0
                while not stop.is_set():
                    name = mine[count % len(mine)]
                    count += 1
                    target = f"{url}/trainjobs/{name}/status"
                    send(session, target, ca, tokens[name], count, steady)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        cpu = cpu_of(operator.pid)
        apiserver = cluster.pids().get("kube-apiserver")
        api_cpu = cpu_of(apiserver) if apiserver else 0.0
        began = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        stop.set()
        for thread in threads:
            thread.join()
        took = time.monotonic() - began
        spent = cpu_of(operator.pid) - cpu - idle_per_second * took
        summarize(f"steady load ({args.clients} clients)", steady, took, spent)
        if apiserver:
            written = steady.codes.get(200, 0)
            api_spent = cpu_of(apiserver) - api_cpu
            print(
                f"  API server CPU per written report: {api_spent / max(1, written) * 1000:.2f} ms"
            )
        return 0
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(timeout=30)
        cluster.down()


def summarize(label: str, tally: Tally, seconds: float, cpu: float) -> None:
    written = tally.codes.get(200, 0)
    codes = ", ".join(f"{code}: {count}" for code, count in sorted(tally.codes.items()))
    latencies = [s * 1000 for s in tally.latencies]
    print(f"{label}:")
    print(f"  {written} written in {seconds:.1f}s = {written / seconds:.0f} reports/s ({codes})")
    print(
        f"  latency p50 {percentile(latencies, 50):.1f} ms, p99 {percentile(latencies, 99):.1f} ms"
    )
    print(f"  operator CPU per written report: {cpu / max(1, written) * 1000:.2f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.progress_server", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--api-qps",
        type=float,
        default=50.0,
        help="the operator's --progress-api-qps (its default 50; raise it to find what the "
        "machine serves)",
    )
    args = parser.parse_args(argv)
    if args.clients > args.jobs:
        parser.error(f"--clients ({args.clients}) must be at most --jobs ({args.jobs})")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
