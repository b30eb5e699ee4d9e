"""Peer benchmark: kubetrain against the Go operators it replaces, on the same workload.

One local control plane (50 fake GPU nodes, as ``benchmarks.operator_scale``) runs, one
at a time and interleaved (kubetrain, peer, kubetrain, peer, ...), each operator on the
burst it serves:

- 100 PyTorchJobs (1 Master + 3 Workers, a GPU per pod): kubetrain against Kubeflow
  training-operator v1.9 (``--enable-scheme=pytorchjob``, its own PyTorchJob CRD);
- 50 MPIJobs (launcher + 2 workers): kubetrain against Kubeflow mpi-operator v0.8 (its
  own ``kubeflow.org/v2beta1`` MPIJob CRD).

Each pairing runs at each operator's default client QPS/burst (kubetrain 20/40,
training-operator 20/30, mpi-operator 5/10) and at equal settings (``--equal-qps``,
``--equal-burst`` for all). Per run: create -> first child, create -> all children and
create -> Running (p50/p99, observed through watches by this process), the wall time until
every job runs, the operator's CPU seconds (user + system, from its start-up done to the
last Running) and peak RSS, and its API requests: counted by the API server, from its
audit log, by user agent (the API server's metrics have no user-agent label), over the
operator's whole life. The table shows the median of the repeats and kubetrain/peer.

    make peer-tools bench-peers                      # builds the Go operators once
    .venv/bin/python -m benchmarks.peers --repeats 3 --modes default,equal

Operators log at their own default level (kubetrain: info, JSON; training-operator:
zap development mode; mpi-operator: klog) into files of the work directory. Figures to
compare, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.operator_scale import (
    CRDS,
    NAMESPACE,
    NAMESPACES,
    JobTimes,
    Observer,
    percentile,
    process_stats,
    submit,
    wait_ready,
)
from cluster.local import LocalCluster
from cluster.process import free_port
from cluster.tools import PEER_TOOL_NAMES, Tools, find_tools
from cluster.topology import default_topology
from kubetrain import __version__
from kubetrain.api.crds import generate_crds
from kubetrain.api.trainer import generate_trainer_crds
from kubetrain.controller.kube import KubeApi

#: The benchmark's own clients (submitting, watching) send this user agent, so the audit
#: log tells their requests from kubetrain's (``kubetrain-operator/...``).
BENCH_USER_AGENT = f"kubetrain-bench/{__version__}"
#: One audit event per request (and one more when a watch ends), metadata only.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
#: The fields of a run's result the table shows, with their labels (seconds unless named).
LATENCY_ROWS = (
    ("create -> first child", "first_child"),
    ("create -> all children", "all_children"),
    ("create -> Running", "running"),
)


@dataclass(frozen=True)
class Operator:
    """How to run one operator on one burst."""

    name: str  # kubetrain | training-operator | mpi-operator
    user_agent_prefix: str
    default_qps: float
    default_burst: int


KUBETRAIN = Operator("kubetrain", "kubetrain-operator/", 20, 40)
TRAINING_OPERATOR = Operator("training-operator", "training-operator/", 20, 30)
MPI_OPERATOR = Operator("mpi-operator", "mpi-operator/", 5, 10)


@dataclass(frozen=True)
class Pairing:
    """A burst of one kind and the peer that serves it upstream."""

    kind: str
    peer: Operator
    jobs: int
    shape: str


@dataclass
class RunResult:
    operator: str
    kind: str
    mode: str
    qps: float
    burst: int
    jobs: int
    running: int
    first_child: list[float] = field(default_factory=list)
    all_children: list[float] = field(default_factory=list)
    running_times: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0
    peak_rss_mib: float = 0.0
    requests: int = 0
    requests_by_call: dict[str, int] = field(default_factory=dict)


class PeerObserver(Observer):
    """The operator_scale observer, told how the Go operators name and label children.

    training-operator labels every pod and Service with the job name (as kubetrain
    does); mpi-operator labels its Service, ConfigMap, Secret and launcher Job only with
    ``app: <job>``, and names its SSH Secret ``<job>-ssh``. A child's controlling owner
    reference names its job for every operator, so that is what is read.
    """

    def job_of(self, obj: dict[str, Any]) -> str | None:
        for owner in obj.get("metadata", {}).get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") in ("PyTorchJob", "MPIJob"):
                return str(owner["name"])
        return super().job_of(obj)

    def child_key(self, kind: str, name: str, job: str) -> tuple[str, str]:
        if kind == "Secret" and name == f"{job}-ssh":
            return (kind, f"{job}-ssh-")
        return super().child_key(kind, name, job)

    def gated_children(self, kind: str, job: str) -> set[tuple[str, str]]:
        # Only "all children" is compared: the Go operators gate nothing (training-operator
        # creates every pod at once with an init container that waits for the master).
        return set()


def audit_requests(log: Path, offset: int, prefix: str) -> tuple[int, dict[str, int], int]:
    """Requests whose user agent starts with ``prefix`` in ``log`` after byte ``offset``:
    their count (distinct audit ids), the count by call (``verb resource[/subresource]``,
    e.g. ``update pytorchjobs/status``) and the new end offset."""
    seen: dict[str, str] = {}
    with log.open("rb") as stream:
        stream.seek(offset)
        data = stream.read()
    end = offset + data.rfind(b"\n") + 1
    for line in data[: end - offset].splitlines():
        if prefix.encode() not in line:
            continue
        event = json.loads(line)
        if str(event.get("userAgent", "")).startswith(prefix):
            seen[event["auditID"]] = _call(event)
    by_call: dict[str, int] = {}
    for call in seen.values():
        by_call[call] = by_call.get(call, 0) + 1
    return len(seen), dict(sorted(by_call.items())), end


def _call(event: dict[str, Any]) -> str:
    """``verb resource[/subresource]`` of an audit event (the verb alone without one)."""
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource += f"/{ref['subresource']}"
    verb = str(event.get("verb"))
    return f"{verb} {resource}" if resource else verb


class Bench:
    """The control plane, the benchmark's client and the runs done so far."""

    def __init__(self, args: argparse.Namespace, workdir: Path, tools: Tools) -> None:
        self.args = args
        self.workdir = workdir
        self.tools = tools
        policy = workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY), encoding="utf-8")
        self.cluster = LocalCluster(
            args.cluster_dir or workdir / "cluster",
            topology=default_topology(cpu_nodes=2, gpu_nodes=args.gpu_nodes, gpus_per_node=8),
            audit_policy=policy,
        )
        self.api: KubeApi | None = None
        self.results: list[RunResult] = []
        self.runs = 0

    def up(self) -> KubeApi:
        started = time.monotonic()
        self.cluster.up(timeout=300)
        print(
            f"control plane with {self.args.gpu_nodes} GPU nodes (audit log on) up in "
            f"{time.monotonic() - started:.1f}s",
            flush=True,
        )
        self.api = KubeApi.connect(str(self.cluster.kubeconfig), qps=1000, burst=2000)
        self.api.user_agent = BENCH_USER_AGENT
        # The observer watches every job kind kubetrain serves, TrainJob included.
        for crd in generate_trainer_crds():
            self.api.apply(crd, resource=CRDS)
        return self.api

    # -- one run -------------------------------------------------------------------------

    def crds_for(self, operator: Operator, kind: str) -> list[dict[str, Any]]:
        """kubetrain's CRDs, the burst's kind replaced by the peer's own CRD for a peer
        (the other kinds stay served: the observer watches every kind)."""
        ours = generate_crds()
        if operator is KUBETRAIN:
            return ours
        if operator is TRAINING_OPERATOR:
            path = self.tools.training_operator_crds / "kubeflow.org_pytorchjobs.yaml"
        else:
            path = self.tools.mpi_operator_crd
        theirs = yaml.safe_load(path.read_text(encoding="utf-8"))
        return [c for c in ours if c["spec"]["names"]["kind"] != kind] + [theirs]

    def install(self, crds: Sequence[dict[str, Any]]) -> None:
        """Apply the operator's own CRDs (the same field manager each time, so each apply
        replaces the previous operator's schema) and a fresh namespace."""
        assert self.api is not None
        for crd in crds:
            self.api.apply(crd, resource=CRDS)
        deadline = time.monotonic() + 60
        for crd in crds:
            name = crd["metadata"]["name"]
            while not _established(self.api.get(CRDS, None, name)):
                if time.monotonic() > deadline:
                    raise SystemExit(f"CRD {name} was not Established in 60s")
                time.sleep(0.2)
        self.api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            resource=NAMESPACES,
        )
        wait_ready(self.api)

    def clean(self) -> None:
        """Delete the namespace and wait until it is gone (its pods free their GPUs)."""
        assert self.api is not None
        self.api.delete(NAMESPACES, None, NAMESPACE)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.api.get(NAMESPACES, None, NAMESPACE) is None:
                return
            time.sleep(0.5)
        raise SystemExit(f"namespace {NAMESPACE} was not deleted in 300s")

    def command(self, operator: Operator, kind: str, qps: float, burst: int) -> list[str]:
        kubeconfig = str(self.cluster.kubeconfig)
        if operator is KUBETRAIN:
            return [
                sys.executable,
                "-m",
                "kubetrain.commands.operator",
                f"--kubeconfig={kubeconfig}",
                f"--namespace={NAMESPACE}",
                f"--kube-api-qps={qps:g}",
                f"--kube-api-burst={burst}",
                # Free ports: another benchmark may run beside this one.
                f"--metrics-port={free_port()}",
                "--metrics-bind-address=127.0.0.1",
                f"--health-port={free_port()}",
                "--health-bind-address=127.0.0.1",
            ]
        if operator is TRAINING_OPERATOR:
            return [
                str(self.tools.path("training-operator")),
                f"--kubeconfig={kubeconfig}",
                f"--namespace={NAMESPACE}",
                "--enable-scheme=pytorchjob",
                f"--kube-api-qps={int(qps)}",
                f"--kube-api-burst={burst}",
            ]
        return [
            str(self.tools.path("mpi-operator")),
            f"--kubeConfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            f"--kube-api-qps={int(qps)}",
            f"--kube-api-burst={burst}",
        ]

    def profile(
        self, operator: Operator, pid: int, log_path: Path
    ) -> subprocess.Popen[bytes] | None:
        """py-spy sampling kubetrain (``--py-spy``): collapsed stacks beside its log."""
        if not self.args.py_spy or operator is not KUBETRAIN:
            return None
        out = log_path.with_suffix(".py-spy.txt")
        return subprocess.Popen(
            [
                *(self.args.py_spy, "record", "--pid", str(pid), "--format", "raw"),
                *("--rate", "250", "--nonblocking", "--output", str(out)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def run(self, pairing: Pairing, operator: Operator, mode: str) -> RunResult:
        assert self.api is not None
        args = self.args
        qps, burst = (
            (operator.default_qps, operator.default_burst)
            if mode == "default"
            else (args.equal_qps, args.equal_burst)
        )
        self.runs += 1
        self.clean()
        self.install(self.crds_for(operator, pairing.kind))
        audit_offset = self.cluster.audit_log.stat().st_size
        log_path = self.workdir / f"run-{self.runs:02d}-{operator.name}-{pairing.kind}.log"
        env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
        source = args.kubetrain_source if operator is KUBETRAIN else None
        process = subprocess.Popen(
            self.command(operator, pairing.kind, qps, burst),
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
            env={**env, "PYTHONPATH": str(source)} if source else env,
            cwd=source,
        )
        try:
            time.sleep(3)  # start-up (imports, informers' first lists) is not measured
            if process.poll() is not None:
                raise SystemExit(f"{operator.name} exited at start:\n{log_path.read_text()}")
            cpu_before, _ = process_stats(process.pid)
            profiler = self.profile(operator, process.pid, log_path)
            prefix = "pt" if pairing.kind == "PyTorchJob" else "mpi"
            names = [(pairing.kind, f"{prefix}-{i:03d}") for i in range(pairing.jobs)]
            times = {name: JobTimes(kind) for kind, name in names}
            observer = PeerObserver(self.api, times)
            observer.start()
            began = time.monotonic()
            submit(self.api, names, times, threads=args.submitters)
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                with observer.lock:
                    if all(t.running_at is not None for t in times.values()):
                        break
                time.sleep(0.2)
            wall = time.monotonic() - began
            cpu_after, peak_rss = process_stats(process.pid)
            observer.stop.set()
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(timeout=60)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        time.sleep(1)  # the audit log is written as responses complete
        requests, by_call, _ = audit_requests(
            self.cluster.audit_log, audit_offset, operator.user_agent_prefix
        )
        values = list(times.values())
        result = RunResult(
            operator=operator.name,
            kind=pairing.kind,
            mode=mode,
            qps=qps,
            burst=burst,
            jobs=pairing.jobs,
            running=sum(1 for t in values if t.running_at is not None),
            first_child=[t.first_child_at - t.submitted for t in values if t.first_child_at],
            all_children=[t.children_at - t.submitted for t in values if t.children_at],
            running_times=[t.running_at - t.submitted for t in values if t.running_at],
            wall=wall,
            cpu=cpu_after - cpu_before,
            peak_rss_mib=peak_rss,
            requests=requests,
            requests_by_call=by_call,
        )
        self.results.append(result)
        print(
            f"  run {self.runs}: {operator.name:17} {pairing.kind} {mode:7} qps {qps:g}/{burst}: "
            f"{result.running}/{pairing.jobs} Running in {wall:.1f}s, CPU {result.cpu:.2f}s, "
            f"RSS {peak_rss:.0f} MiB, {requests} requests {by_call}",
            flush=True,
        )
        return result


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _median(values: Iterator[float]) -> float:
    listed = list(values)
    return statistics.median(listed) if listed else float("nan")


def _samples(result: RunResult, key: str) -> list[float]:
    if key == "first_child":
        return result.first_child
    if key == "all_children":
        return result.all_children
    return result.running_times


def summarize(results: list[RunResult]) -> dict[str, float]:
    """Medians over the repeats of one operator, one kind, one mode."""
    summary = {
        "runs": float(len(results)),
        "running": _median(float(r.running) for r in results),
        "wall": _median(r.wall for r in results),
        "cpu": _median(r.cpu for r in results),
        "cpu_per_job_ms": _median(r.cpu / r.jobs * 1000 for r in results),
        "peak_rss_mib": _median(r.peak_rss_mib for r in results),
        "requests": _median(float(r.requests) for r in results),
        "requests_per_job": _median(r.requests / r.jobs for r in results),
    }
    for _label, key in LATENCY_ROWS:
        summary[f"{key}_p50"] = _median(percentile(_samples(r, key), 50) for r in results)
        summary[f"{key}_p99"] = _median(percentile(_samples(r, key), 99) for r in results)
    return summary


def print_table(pairing: Pairing, mode: str, ours: list[RunResult], peer: list[RunResult]) -> None:
    a, b = summarize(ours), summarize(peer)
    settings = (
        f"kubetrain {ours[0].qps:g}/{ours[0].burst}, "
        f"{pairing.peer.name} {peer[0].qps:g}/{peer[0].burst}"
    )
    print(
        f"\n{pairing.kind} x{pairing.jobs} ({pairing.shape}), {mode} QPS/burst ({settings}); "
        f"median of {len(ours)} + {len(peer)} interleaved runs"
    )
    print(f"  {'':32}{'kubetrain':>12}{pairing.peer.name:>19}{'kubetrain/peer':>16}")

    def row(label: str, key: str, unit: str, digits: int) -> None:
        ratio = a[key] / b[key] if b[key] else float("nan")
        print(
            f"  {label:32}{a[key]:>11.{digits}f}{unit}{b[key]:>18.{digits}f}{unit}{ratio:>15.2f}x"
        )

    for label, key in LATENCY_ROWS:
        row(f"{label} p50", f"{key}_p50", "s", 2)
        row(f"{label} p99", f"{key}_p99", "s", 2)
    row("wall until all Running", "wall", "s", 1)
    row("operator CPU", "cpu", "s", 2)
    row("operator CPU per job", "cpu_per_job_ms", "m", 1)
    row("operator peak RSS (MiB)", "peak_rss_mib", " ", 0)
    row("API requests", "requests", " ", 0)
    row("API requests per job", "requests_per_job", " ", 1)
    if a["running"] < pairing.jobs or b["running"] < pairing.jobs:
        print(
            f"  NOTE: not every job reached Running within --timeout "
            f"(kubetrain {a['running']:.0f}, {pairing.peer.name} {b['running']:.0f} "
            f"of {pairing.jobs})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of each operator per mode")
    parser.add_argument(
        "--modes", default="default,equal", help="default (each operator's QPS/burst), equal"
    )
    # As benchmarks.operator_scale runs kubetrain: high enough that no client waits.
    parser.add_argument("--equal-qps", type=float, default=500, help="QPS for every operator")
    parser.add_argument("--equal-burst", type=int, default=1000, help="burst for every operator")
    parser.add_argument("--kinds", default="PyTorchJob,MPIJob", help="bursts to run")
    parser.add_argument("--pytorch-jobs", type=int, default=100)
    parser.add_argument("--mpi-jobs", type=int, default=50)
    parser.add_argument("--gpu-nodes", type=int, default=50)
    parser.add_argument("--submitters", type=int, default=4, help="threads creating the jobs")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for Running")
    parser.add_argument(
        "--operators", default="kubetrain,peer", help="kubetrain and/or peer (the Go operator)"
    )
    parser.add_argument(
        "--py-spy", default="", help="path of py-spy: sample kubetrain's runs (raw stacks)"
    )
    parser.add_argument(
        "--kubetrain-source",
        type=Path,
        default=None,
        help="run kubetrain's operator from this source tree (e.g. an export of main)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    parser.add_argument(
        "--cluster-dir", type=Path, default=None, help="work directory of the control plane"
    )
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= {"default", "equal"} or args.repeats < 1:
        parser.error(f"--modes {args.modes!r}: expected default and/or equal; --repeats >= 1")
    pairings = {
        "PyTorchJob": Pairing(
            "PyTorchJob", TRAINING_OPERATOR, args.pytorch_jobs, "Master + 3 Workers"
        ),
        "MPIJob": Pairing("MPIJob", MPI_OPERATOR, args.mpi_jobs, "launcher + 2 workers"),
    }
    kinds = [k for k in args.kinds.split(",") if k]
    if not set(kinds) <= set(pairings):
        parser.error(f"--kinds {args.kinds!r}: expected PyTorchJob and/or MPIJob")

    tools = find_tools(only=("control-plane", *PEER_TOOL_NAMES))
    # A SIGTERM (a timeout) unwinds through the ``finally`` that stops the control plane.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-peers-"))
    bench = Bench(args, workdir, tools)
    print(
        f"peers: training-operator {tools.versions.training_operator}, mpi-operator "
        f"{tools.versions.mpi_operator}; operator logs in {workdir}",
        flush=True,
    )
    try:
        bench.up()
        for kind in kinds:
            pairing = pairings[kind]
            for mode in modes:
                for _ in range(args.repeats):
                    if "kubetrain" in args.operators:
                        bench.run(pairing, KUBETRAIN, mode)
                    if "peer" in args.operators:
                        bench.run(pairing, pairing.peer, mode)
        for kind in kinds:
            pairing = pairings[kind]
            for mode in modes:
                ours = [
                    r
                    for r in bench.results
                    if r.kind == kind and r.mode == mode and r.operator == "kubetrain"
                ]
                peer = [
                    r
                    for r in bench.results
                    if r.kind == kind and r.mode == mode and r.operator != "kubetrain"
                ]
                if ours and peer:
                    print_table(pairing, mode, ours, peer)
        if args.json is not None:
            args.json.write_text(
                json.dumps([asdict(r) for r in bench.results], indent=1), encoding="utf-8"
            )
        return 0
    finally:
        bench.cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
