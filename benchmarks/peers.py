"""Peer benchmark: kubetrain against the Go operators it replaces, on the same workload.

One local control plane (50 fake GPU nodes, as ``benchmarks.operator_scale``) runs, one
at a time and interleaved (kubetrain, peer, kubetrain, peer, ...), each operator on the
burst it serves:

- 100 PyTorchJobs (1 Master + 3 Workers, a GPU per pod): kubetrain against Kubeflow
  training-operator v1.9 (``--enable-scheme=pytorchjob``, its own PyTorchJob CRD);
- 50 MPIJobs (launcher + 2 workers): kubetrain against Kubeflow mpi-operator v0.8 (its
  own ``kubeflow.org/v2beta1`` MPIJob CRD);
- 100 TrainJobs of 4 nodes (a GPU each), the body the Kubeflow SDK's ``TrainerClient()
  .train(CustomTrainer(func, num_nodes=4, resources_per_node={"nvidia.com/gpu": 1}),
  runtime="torch-distributed")`` posts, on upstream's ``torch-distributed`` runtime:
  kubetrain against upstream Kubeflow Trainer v2.3 with JobSet v0.12, their CRDs and
  their webhooks (``benchmarks.peer_trainer``). Upstream's side is two processes, counted
  together as the peer (CPU: the sum; peak RSS: the sum of both peaks; requests: both
  user agents), and kube-controller-manager's Job controller, which creates the pods of
  the JobSet's Jobs: its requests on the namespace's Jobs and Pods are a row of their own
  (for kubetrain too, which creates its pods itself), and so is its CPU over the same
  window as the operator's (all of its controllers: the Job controller's share is not
  separable; the endpoint slices of each job's headless Service are there for both).
  Each run starts once kube-controller-manager has stopped sending requests on the
  previous run's deleted namespace (its garbage collector looks up upstream's Jobs for a
  while after the namespace is gone).
  Trainer and JobSet watch every namespace (neither has a namespace option); the cluster
  holds nothing else.

A TrainJob's children are what both operators create and the SDK reads: its 4 node pods
(upstream's ``<job>-node-0-<index>-<random>``, counted by index) and the headless Service
``<job>``; upstream's intermediate objects (runtime snapshot ConfigMap, JobSet, Job) are
not counted. A TrainJob is Running, for both, as the SDK decides (upstream sets no Running
condition; trainer-v2-sdk-facts section 2.4): when all of its 4 node pods run, the
``jobset.sigs.k8s.io/jobset-name`` label naming the job (kubetrain's ``status.state`` is
not read).

Each pairing runs at each operator's default client QPS/burst (kubetrain 20/40,
training-operator 20/30, mpi-operator 5/10, Trainer 50/100 with JobSet 500/500) and at
equal settings (``--equal-qps``, ``--equal-burst`` for all, Trainer and JobSet each). Per
run: create -> first child, create -> all children and create -> Running (p50/p99,
observed through watches by this process), the wall time until every job runs, the
operator's CPU seconds (user + system, from its start-up done to the last Running) and
peak RSS, and its API requests: counted by the API server, from its audit log, by user
agent (``benchmarks.peer_report``), over the operator's whole life. The table shows the
median of the repeats and kubetrain/peer.

    make peer-tools bench-peers                      # builds the Go operators once
    .venv/bin/python -m benchmarks.peers --repeats 3 --modes default,equal
    .venv/bin/python -m benchmarks.peers --kinds TrainJob --trainjobs 20 --repeats 1

Operators log at their own default level (kubetrain: info, JSON; training-operator:
zap development mode; mpi-operator: klog; Trainer and JobSet: zap) into files of the
work directory. Figures to compare, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.operator_scale import (
    CRDS,
    NAMESPACE,
    NAMESPACES,
    TRAINJOB_NODES,
    JobTimes,
    process_stats,
    wait_ready,
)
from benchmarks.peer_report import (
    KCM_USER_AGENT,
    RunResult,
    audit_requests,
    kcm_job_requests,
    print_table,
)
from benchmarks.peer_trainer import (
    CLUSTER_RUNTIMES,
    JOBSET_BURST,
    JOBSET_QPS,
    JOBSET_USER_AGENT,
    TRAINER_BURST,
    TRAINER_QPS,
    TRAINER_USER_AGENT,
    UpstreamTrainer,
    upstream_crds,
)
from benchmarks.peer_workload import PeerObserver, job_names, sdk_runtime, submit
from cluster.local import LocalCluster
from cluster.process import free_port
from cluster.tools import PEER_TOOL_NAMES, Tools, find_tools
from cluster.topology import default_topology
from kubetrain import __version__
from kubetrain.api.crds import all_crds, crd_for
from kubetrain.api.kinds import TRAINER_KINDS
from kubetrain.controller.kube import KubeApi
from kubetrain.manifest import parse_yaml

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


@dataclass(frozen=True)
class Operator:
    """How to run one operator on one burst."""

    name: str  # kubetrain | training-operator | mpi-operator | trainer+jobset
    user_agent_prefix: str | tuple[str, ...]
    default_qps: float
    default_burst: int


KUBETRAIN = Operator("kubetrain", "kubetrain-operator/", 20, 40)
TRAINING_OPERATOR = Operator("training-operator", "training-operator/", 20, 30)
MPI_OPERATOR = Operator("mpi-operator", "mpi-operator/", 5, 10)
#: Upstream Trainer v2 and JobSet (the defaults are Trainer's; JobSet's: ``JOBSET_QPS``).
TRAINER = Operator(
    "trainer+jobset", (TRAINER_USER_AGENT, JOBSET_USER_AGENT), TRAINER_QPS, TRAINER_BURST
)


@dataclass(frozen=True)
class Pairing:
    """A burst of one kind and the peer that serves it upstream."""

    kind: str
    peer: Operator
    jobs: int
    shape: str


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
        for kind in TRAINER_KINDS:
            self.api.apply(crd_for(kind), resource=CRDS)
        return self.api

    # -- one run -------------------------------------------------------------------------

    def crds_for(self, operator: Operator, kind: str) -> list[dict[str, Any]]:
        """kubetrain's CRDs, the burst's kind replaced by the peer's own CRD for a peer
        (the other kinds stay served: the observer watches every kind); for upstream
        Trainer, its three CRDs and JobSet's."""
        ours = all_crds()
        if operator is KUBETRAIN:
            return ours
        if operator is TRAINER:
            theirs = upstream_crds(self.tools)
        elif operator is TRAINING_OPERATOR:
            path = self.tools.training_operator_crds / "kubeflow.org_pytorchjobs.yaml"
            theirs = [parse_yaml(path.read_text(encoding="utf-8"))]
        else:
            theirs = [parse_yaml(self.tools.mpi_operator_crd.read_text(encoding="utf-8"))]
        replaced = {crd["metadata"]["name"] for crd in theirs}
        return [c for c in ours if c["metadata"]["name"] not in replaced] + theirs

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
        # The runtime the SDK's TrainJobs name, under whichever CRD is installed now.
        self.api.apply(sdk_runtime(self.tools.trainer_runtimes_dir), resource=CLUSTER_RUNTIMES)

    def clean(self) -> None:
        """Delete the namespace and wait until it is gone (its pods free their GPUs), then
        until kube-controller-manager is done with it (``settle``)."""
        assert self.api is not None
        self.api.delete(NAMESPACES, None, NAMESPACE)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.api.get(NAMESPACES, None, NAMESPACE) is None:
                self.settle()
                return
            time.sleep(0.5)
        raise SystemExit(f"namespace {NAMESPACE} was not deleted in 300s")

    def settle(self, quiet: float = 3.0, limit: float = 120.0) -> None:
        """Wait until kube-controller-manager has sent no request on the namespace for
        ``quiet`` seconds (at most ``limit``): its garbage collector still looks up the
        owners of the previous run's objects (upstream's Jobs) after the namespace is
        gone, which would count as the next run's work."""
        log = self.cluster.audit_log
        offset = log.stat().st_size
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            time.sleep(quiet)
            count, _, offset = audit_requests(log, offset, KCM_USER_AGENT, namespace=NAMESPACE)
            if count == 0:
                return

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
                f"--progress-port={free_port()}",
                "--progress-bind-address=127.0.0.1",
                "--progress-host=127.0.0.1",
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
        self, operator: Operator, processes: Mapping[str, subprocess.Popen[bytes]], log_path: Path
    ) -> subprocess.Popen[bytes] | None:
        """py-spy sampling kubetrain (``--py-spy``): collapsed stacks beside its log."""
        if not self.args.py_spy or operator is not KUBETRAIN:
            return None
        pid = processes[operator.name].pid
        out = log_path.with_suffix(".py-spy.txt")
        return subprocess.Popen(
            [
                *(self.args.py_spy, "record", "--pid", str(pid), "--format", "raw"),
                *("--rate", "250", "--nonblocking", "--output", str(out)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(
        self, operator: Operator, kind: str, qps: float | None, burst: int | None, log: Path
    ) -> tuple[dict[str, subprocess.Popen[bytes]], UpstreamTrainer | None]:
        """The operator's processes by name (upstream Trainer: Trainer's and JobSet's,
        ready and admitting through their webhooks; ``qps``/``burst`` None: its own)."""
        if operator is TRAINER:
            upstream = UpstreamTrainer(self.api_, self.cluster.kubeconfig, self.tools, self.workdir)
            processes = upstream.start(
                namespace=NAMESPACE, log_prefix=log.with_suffix(""), qps=qps, burst=burst
            )
            return processes, upstream
        assert qps is not None and burst is not None
        env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
        source = self.args.kubetrain_source if operator is KUBETRAIN else None
        process = subprocess.Popen(
            self.command(operator, kind, qps, burst),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env={**env, "PYTHONPATH": str(source)} if source else env,
            cwd=source,
        )
        return {operator.name: process}, None

    @property
    def api_(self) -> KubeApi:
        assert self.api is not None
        return self.api

    def run(self, pairing: Pairing, operator: Operator, mode: str) -> RunResult:
        api, args = self.api_, self.args
        qps, burst = (
            (operator.default_qps, operator.default_burst)
            if mode == "default"
            else (args.equal_qps, args.equal_burst)
        )
        settings = f"{qps:g}/{burst}"
        if operator is TRAINER:
            jobset = (JOBSET_QPS, JOBSET_BURST) if mode == "default" else (qps, burst)
            settings += f" (JobSet {jobset[0]:g}/{jobset[1]})"
        self.runs += 1
        self.clean()
        self.install(self.crds_for(operator, pairing.kind))
        audit_offset = self.cluster.audit_log.stat().st_size
        log_path = self.workdir / f"run-{self.runs:02d}-{operator.name}-{pairing.kind}.log"
        own = mode == "default" and operator is TRAINER  # its shipped configuration's
        processes, upstream = self.start(
            operator, pairing.kind, None if own else qps, None if own else burst, log_path
        )
        try:
            time.sleep(3)  # start-up (imports, informers' first lists) is not measured
            for name, process in processes.items():
                if process.poll() is not None:
                    own_log = log_path if upstream is None else upstream.logs[name]
                    raise SystemExit(f"{name} exited at start:\n{own_log.read_text()}")
            cpu_before = {name: process_stats(p.pid)[0] for name, p in processes.items()}
            kcm_pid = self.cluster.pids()["kube-controller-manager"]
            kcm_before = process_stats(kcm_pid)[0]
            profiler = self.profile(operator, processes, log_path)
            times = {name: JobTimes(pairing.kind) for name in job_names(pairing.kind, pairing.jobs)}
            observer = PeerObserver(api, times)
            observer.start()
            began = time.monotonic()
            submit(api, pairing.kind, times, threads=args.submitters)
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                with observer.lock:
                    if all(t.running_at is not None for t in times.values()):
                        break
                time.sleep(0.2)
            wall = time.monotonic() - began
            after = {name: process_stats(p.pid) for name, p in processes.items()}
            kcm_cpu = process_stats(kcm_pid)[0] - kcm_before
            observer.stop.set()
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(timeout=60)
        finally:
            stopping = time.monotonic()
            if upstream is not None:
                upstream.stop()
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            stop_seconds = time.monotonic() - stopping
        time.sleep(1)  # the audit log is written as responses complete
        log = self.cluster.audit_log
        requests, by_call, _ = audit_requests(log, audit_offset, operator.user_agent_prefix)
        kcm_requests, kcm_by_call = kcm_job_requests(log, audit_offset, NAMESPACE)
        cpu = {name: after[name][0] - cpu_before[name] for name in processes}
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
            cpu=sum(cpu.values()),
            peak_rss_mib=sum(stats[1] for stats in after.values()),
            requests=requests,
            requests_by_call=by_call,
            settings=settings,
            cpu_by_process=cpu,
            kcm_requests=kcm_requests,
            kcm_by_call=kcm_by_call,
            kcm_cpu=kcm_cpu,
            stop_seconds=stop_seconds,
        )
        self.results.append(result)
        split = f" {', '.join(f'{n} {c:.2f}s' for n, c in cpu.items())}" if len(cpu) > 1 else ""
        print(
            f"  run {self.runs}: {operator.name:17} {pairing.kind} {mode:7} {settings}: "
            f"{result.running}/{pairing.jobs} Running in {wall:.1f}s, CPU {result.cpu:.2f}s"
            f"{split}, RSS {result.peak_rss_mib:.0f} MiB, {requests} requests {by_call}; "
            f"kube-controller-manager CPU {kcm_cpu:.2f}s, {kcm_requests} {kcm_by_call}; "
            f"SIGTERM -> exit {stop_seconds:.2f}s",
            flush=True,
        )
        return result


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


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
    parser.add_argument("--kinds", default="PyTorchJob,MPIJob,TrainJob", help="bursts to run")
    parser.add_argument("--pytorch-jobs", type=int, default=100)
    parser.add_argument("--mpi-jobs", type=int, default=50)
    parser.add_argument("--trainjobs", type=int, default=100)
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
        "TrainJob": Pairing(
            "TrainJob",
            TRAINER,
            args.trainjobs,
            f"{TRAINJOB_NODES} nodes, a GPU each, the SDK's body on torch-distributed",
        ),
    }
    kinds = [k for k in args.kinds.split(",") if k]
    if not set(kinds) <= set(pairings):
        parser.error(f"--kinds {args.kinds!r}: expected some of {', '.join(pairings)}")

    tools = find_tools(only=("control-plane", *PEER_TOOL_NAMES))
    # A SIGTERM (a timeout) unwinds through the ``finally`` that stops the control plane.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-peers-"))
    bench = Bench(args, workdir, tools)
    versions = tools.versions
    print(
        f"peers: training-operator {versions.training_operator}, mpi-operator "
        f"{versions.mpi_operator}, Trainer {versions.trainer} with JobSet {versions.jobset}; "
        f"operator logs in {workdir}",
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
                    print_table(kind, pairing.jobs, pairing.shape, mode, ours, peer)
        if args.json is not None:
            args.json.write_text(
                json.dumps([asdict(r) for r in bench.results], indent=1), encoding="utf-8"
            )
        return 0
    finally:
        bench.cluster.down()


if __name__ == "__main__":
    raise SystemExit(main())
