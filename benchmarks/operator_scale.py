"""Operator scale benchmark on the local control plane.

Starts a control plane with 50 fake GPU nodes (8 GPUs each), runs ``kubetrain operator``
as its own process, submits 100 PyTorchJobs (1 Master + 3 Workers, a GPU per pod), 50
MPIJobs (2 workers, launcher) and 100 TrainJobs (4 nodes each, the shape the Kubeflow
SDK's ``train(trainer=CustomTrainer(func, num_nodes=4))`` creates, on a torch runtime),
and reports, per kind and per job, the time from its create call to (a) every child the
operator creates having appeared and (b) Running (the Running condition; a TrainJob's
``status.state``); plus the total wall time and the operator's CPU seconds and peak RSS.

"All children" includes the children the startup gate holds back until the pods they
need run (PyTorch workers wait for the Master), so it contains a pod start on the fake
cluster. The two rows that separate the operator's own latency from that wait: "create ->
ungated children" (everything not gated) and "gate open -> gated children" (from the
gating pods' Running to the gated children). An MPIJob's launcher Job is created at once
(``launcherCreationPolicy: AtStartup``), its pod gated until the workers run; a
TrainJob's nodes start together.

    .venv/bin/python -m benchmarks.operator_scale            # or: make bench
    .venv/bin/python -m benchmarks.operator_scale --cluster-dir build/cluster  # reuse one

Times are observed through watches by this process (monotonic clock), so they include
the watch delivery delay; they are figures to compare, never assertions.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.local import LocalCluster
from cluster.process import free_port
from cluster.topology import GPU_RESOURCE, default_topology
from kubetrain.api import keys as K
from kubetrain.api.crds import all_crds
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import (
    BATCH_JOBS,
    CONFIG_MAPS,
    JOB_RESOURCES,
    PODS,
    RUNTIME_RESOURCES,
    SECRETS,
    SERVICES,
    KubeApi,
    Resource,
)

NAMESPACE = "bench"
TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


def pytorch_job(name: str) -> dict[str, Any]:
    def template() -> dict[str, Any]:
        return {
            "spec": {
                "tolerations": [TOLERATION],
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "registry.example/trainer:1",
                        "resources": {"limits": {GPU_RESOURCE: "1"}},
                    }
                ],
            }
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nprocPerNode": "1",
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 3, "template": template()},
            },
        },
    }


def mpi_job(name: str) -> dict[str, Any]:
    def template(container: str) -> dict[str, Any]:
        return {
            "spec": {
                "tolerations": [TOLERATION],
                "containers": [{"name": container, "image": "registry.example/horovod:1"}],
            }
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher")},
                "Worker": {"replicas": 2, "template": template("worker")},
            },
        },
    }


TRAINJOB_NODES = 4
RUNTIME = "bench-torch"


def runtime() -> dict[str, Any]:
    """A torch ClusterTrainingRuntime like upstream's torch-distributed, tolerating the
    GPU taint."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME, "labels": {K.TRAINER_FRAMEWORK_LABEL: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {K.TRAINER_ANCESTOR_LABEL: "trainer"}},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "tolerations": [TOLERATION],
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "registry.example/torch:1",
                                                }
                                            ],
                                        }
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def trainjob(name: str, nodes: int = TRAINJOB_NODES) -> dict[str, Any]:
    """What the SDK's ``train(trainer=CustomTrainer(func, num_nodes=4))`` posts."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runtimeRef": {"name": RUNTIME, "kind": "ClusterTrainingRuntime"},
            "trainer": {
                "command": ["bash", "-c", "python train.py"],
                "numNodes": nodes,
            },
        },
    }


#: Children the operator creates, per kind, by (resource kind, name); an MPIJob's SSH
#: Secret has a generated name (``<job>-ssh-<random>``) and is matched by its prefix.
def expected_children(kind: str, name: str) -> set[tuple[str, str]]:
    if kind == "PyTorchJob":
        pods = [f"{name}-master-0"] + [f"{name}-worker-{i}" for i in range(3)]
        return {("Pod", p) for p in pods} | {("Service", p) for p in pods}
    if kind == "TrainJob":
        nodes = {("Pod", f"{name}-node-0-{i}") for i in range(TRAINJOB_NODES)}
        return nodes | {("Service", name)}
    workers = {("Pod", f"{name}-worker-{i}") for i in range(2)}
    return workers | {
        ("Service", name),
        ("ConfigMap", f"{name}-config"),
        ("Secret", f"{name}-ssh-"),
        ("Job", f"{name}-launcher"),
    }


def child_key(kind: str, name: str, job: str) -> tuple[str, str]:
    """How a child is counted in ``expected_children``."""
    if kind == "Secret" and name.startswith(f"{job}-ssh-"):
        return (kind, f"{job}-ssh-")
    return (kind, name)


def gated_children(kind: str, name: str) -> set[tuple[str, str]]:
    """Children the operator creates only once the startup gate opens: PyTorch workers
    wait for the Master to run."""
    if kind == "PyTorchJob":
        return {("Pod", f"{name}-worker-{i}") for i in range(3)}
    return set()


def gate_pods(kind: str, name: str) -> set[str]:
    """The pods whose Running phase opens the job's startup gate."""
    if kind == "PyTorchJob":
        return {f"{name}-master-0"}
    if kind == "MPIJob":
        return {f"{name}-worker-{i}" for i in range(2)}
    return set()


@dataclass
class JobTimes:
    kind: str
    submitted: float = 0.0
    first_child_at: float | None = None
    ungated_at: float | None = None
    gate_open_at: float | None = None
    children_at: float | None = None
    running_at: float | None = None
    seen: set[tuple[str, str]] = field(default_factory=set)
    running_pods: set[str] = field(default_factory=set)


class Observer:
    """Watches the namespace and timestamps each job's milestones, and each pod's time
    from creation to Running (the scheduler's and the fake kubelet's share)."""

    def __init__(self, api: KubeApi, jobs: Mapping[str, JobTimes]) -> None:
        self.api = api
        self.jobs = jobs
        self.pod_added: dict[str, float] = {}
        self.pod_start: list[float] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.ready = threading.Barrier(1 + 5 + len(JOB_RESOURCES))

    def start(self) -> None:
        for resource in (PODS, SERVICES, CONFIG_MAPS, SECRETS, BATCH_JOBS):
            self._spawn(resource, self._child)
        for resource in JOB_RESOURCES.values():
            self._spawn(resource, self._job)
        self.ready.wait()

    def _spawn(self, resource: Resource, handle: Any) -> None:
        thread = threading.Thread(target=self._watch, args=(resource, handle), daemon=True)
        thread.start()
        self.threads.append(thread)

    def _watch(self, resource: Resource, handle: Any) -> None:
        _items, rv = self.api.list(resource, NAMESPACE)
        self.ready.wait()
        while not self.stop.is_set():
            try:
                for event in self.api.watch(
                    resource, NAMESPACE, resource_version=rv, timeout_seconds=60
                ):
                    rv = str(event.object.get("metadata", {}).get("resourceVersion") or rv)
                    if event.type in ("ADDED", "MODIFIED"):
                        handle(resource, event.object)
            except ApiError:
                time.sleep(0.2)

    def job_of(self, obj: dict[str, Any]) -> str | None:
        """The job a child belongs to (kubetrain labels every child with it)."""
        labels = obj.get("metadata", {}).get("labels") or {}
        job = labels.get(K.JOB_NAME)
        return None if job is None else str(job)

    def expected_children(self, kind: str, job: str) -> set[tuple[str, str]]:
        """Every child the operator creates for ``job``, keyed as ``child_key`` does."""
        return expected_children(kind, job)

    def gated_children(self, kind: str, job: str) -> set[tuple[str, str]]:
        """The children the operator holds back until the job's startup gate opens."""
        return gated_children(kind, job)

    def child_key(self, kind: str, name: str, job: str) -> tuple[str, str]:
        """How a child is counted in ``expected_children``."""
        return child_key(kind, name, job)

    def _child(self, resource: Resource, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        job = self.job_of(obj)
        name = str(obj["metadata"]["name"])
        with self.lock:
            if resource is PODS:
                phase = (obj.get("status") or {}).get("phase")
                if name not in self.pod_added:
                    self.pod_added[name] = now
                elif phase == "Running" and self.pod_added[name] > 0:
                    self.pod_start.append(now - self.pod_added[name])
                    self.pod_added[name] = -1.0
            times = self.jobs.get(str(job))
            if times is None:
                return
            if resource is PODS and (obj.get("status") or {}).get("phase") == "Running":
                times.running_pods.add(name)
                gate = gate_pods(times.kind, str(job))
                if times.gate_open_at is None and gate <= times.running_pods:
                    times.gate_open_at = now
            if times.children_at is not None:
                return
            if times.first_child_at is None:
                times.first_child_at = now
            times.seen.add(self.child_key(resource.kind, name, str(job)))
            expected = self.expected_children(times.kind, str(job))
            ungated = expected - self.gated_children(times.kind, str(job))
            if times.ungated_at is None and ungated <= times.seen:
                times.ungated_at = now
            if expected <= times.seen:
                times.children_at = now

    def _job(self, resource: Resource, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        status = obj.get("status") or {}
        conditions = status.get("conditions") or []
        running = (
            any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)
            or status.get("state") == "Running"
        )
        with self.lock:
            times = self.jobs.get(str(obj["metadata"]["name"]))
            if times is not None and running and times.running_at is None:
                times.running_at = now


def process_stats(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS in MiB of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cpu, peak


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


GANG_MODES = ("off", "on", "both")


@dataclass
class Run:
    """One burst's figures."""

    gang: bool
    times: dict[str, JobTimes]
    submitted: float
    wall: float
    cpu: float
    peak_rss: float
    pod_start: list[float]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.operator_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pytorch-jobs", type=int, default=100)
    parser.add_argument("--mpi-jobs", type=int, default=50)
    parser.add_argument("--trainjobs", type=int, default=100)
    parser.add_argument("--gpu-nodes", type=int, default=50)
    parser.add_argument("--workers", type=int, default=16, help="operator --workers")
    parser.add_argument("--qps", type=float, default=500, help="operator --kube-api-qps")
    parser.add_argument("--burst", type=int, default=1000, help="operator --kube-api-burst")
    parser.add_argument("--submitters", type=int, default=4, help="threads creating the jobs")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for Running")
    parser.add_argument(
        "--cluster-dir",
        type=Path,
        default=None,
        help="use a running control plane (make cluster-up; with --gang=off only)",
    )
    parser.add_argument(
        "--gang",
        choices=GANG_MODES,
        default="off",
        help="gang scheduling: 'on' runs the scheduler-plugins scheduler (Coscheduling) in "
        "kube-scheduler's place and the operator with --gang-scheduler=scheduler-plugins; "
        "'both' runs the burst without, then with it, each on a fresh control plane, and "
        "prints the figures side by side",
    )
    args = parser.parse_args(argv)
    if args.cluster_dir is not None and args.gang != "off":
        parser.error(
            f"--cluster-dir runs on a control plane started elsewhere, so it cannot choose "
            f"its scheduler: use it with --gang=off, not --gang={args.gang}"
        )
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.gang]
    runs = []
    for gang in modes:
        run = run_burst(args, gang=gang)
        if run is None:
            return 1
        runs.append(run)
    if len(runs) == 2:
        side_by_side(runs[0], runs[1])
    return 0 if all(all(t.running_at for t in r.times.values()) for r in runs) else 1


def run_burst(args: argparse.Namespace, *, gang: bool) -> Run | None:
    """One burst of jobs on a control plane of its own (or ``args.cluster_dir``); None
    when the operator does not start."""
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-bench-"))
    own_cluster = args.cluster_dir is None
    cluster = LocalCluster(
        args.cluster_dir or workdir / "cluster",
        topology=default_topology(cpu_nodes=2, gpu_nodes=args.gpu_nodes, gpus_per_node=8),
        scheduler="coscheduling" if gang else "kube",
    )
    print(f"\ngang scheduling: {'on (scheduler-plugins Coscheduling)' if gang else 'off'}")
    operator: subprocess.Popen[bytes] | None = None
    try:
        if own_cluster:
            started = time.monotonic()
            cluster.up(timeout=300)
            took = time.monotonic() - started
            print(f"control plane with {args.gpu_nodes} GPU nodes up in {took:.1f}s")
        api = KubeApi.connect(str(cluster.kubeconfig), qps=1000, burst=2000, pool_size=32)
        prepare(api, all_crds())

        log_path = workdir / "operator.log"
        # Free ports: another benchmark on this machine may hold fixed ones.
        metrics_port = free_port()
        operator = subprocess.Popen(
            operator_command(
                cluster.kubeconfig,
                args,
                metrics_port=metrics_port,
                health_port=free_port(),
                extra=("--gang-scheduler=scheduler-plugins",) if gang else (),
            ),
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        time.sleep(3)
        if operator.poll() is not None:
            print(log_path.read_text(), file=sys.stderr)
            return None
        cpu_before, _ = process_stats(operator.pid)

        names = [("PyTorchJob", f"pt-{i:03d}") for i in range(args.pytorch_jobs)]
        names += [("MPIJob", f"mpi-{i:03d}") for i in range(args.mpi_jobs)]
        names += [("TrainJob", f"tj-{i:03d}") for i in range(args.trainjobs)]
        names.sort(key=lambda kn: kn[1].split("-")[1] + kn[0])  # interleave the kinds
        times = {name: JobTimes(kind) for kind, name in names}
        observer = Observer(api, times)
        observer.start()

        began = time.monotonic()
        submit(api, names, times, threads=args.submitters)
        submitted = time.monotonic() - began
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            with observer.lock:
                if all(t.running_at is not None for t in times.values()):
                    break
            time.sleep(0.2)
        wall = time.monotonic() - began
        cpu_after, peak_rss = process_stats(operator.pid)
        observer.stop.set()
        print_reconcile_stats(metrics_port)

        run = Run(
            gang, times, submitted, wall, cpu_after - cpu_before, peak_rss, observer.pod_start
        )
        report(args, run)
        return run
    finally:
        if operator is not None and operator.poll() is None:
            operator.terminate()
            operator.wait(timeout=30)
        if own_cluster:
            cluster.down()


def side_by_side(off: Run, on: Run) -> None:
    """The two runs' figures in one table: p50 / p99 per kind and milestone, and the
    whole burst's totals."""
    print("\nside by side: gang scheduling off | on (Coscheduling), p50 / p99 in seconds")
    print(f"{'':44}{'off':>17}{'on':>17}")
    kinds = sorted({t.kind for t in off.times.values()})

    def cell(values: list[float]) -> str:
        if not values:
            return "-"
        return f"{percentile(values, 50):.2f} / {percentile(values, 99):.2f}"

    for kind in ["all jobs", *kinds]:
        rows = []
        for run in (off, on):
            chosen = [t for t in run.times.values() if kind in ("all jobs", t.kind)]
            rows.append(dict(_rows(chosen, None)))
        for label in ("create -> all children", "create -> Running"):
            print(
                f"  {kind + ': ' + label:42}{cell(rows[0].get(label, [])):>17}"
                f"{cell(rows[1].get(label, [])):>17}"
            )

    def totals(r: Run) -> dict[str, str]:
        return {
            "jobs Running": f"{sum(1 for t in r.times.values() if t.running_at)}/{len(r.times)}",
            "pod created -> Running": cell(r.pod_start),
            "wall time (s)": f"{r.wall:.1f}",
            "operator CPU (s)": f"{r.cpu:.1f}",
            "operator peak RSS (MiB)": f"{r.peak_rss:.0f}",
        }

    for label, value in totals(off).items():
        print(f"  {label:42}{value:>17}{totals(on)[label]:>17}")


def operator_command(
    kubeconfig: Path,
    args: argparse.Namespace,
    *,
    metrics_port: int,
    health_port: int,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """``kubetrain operator`` for a benchmark: the bench's namespace, ``args``' workers,
    QPS and burst, endpoints on 127.0.0.1, warnings only."""
    return [
        sys.executable,
        "-m",
        "kubetrain.commands.operator",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={NAMESPACE}",
        f"--workers={args.workers}",
        f"--kube-api-qps={args.qps:g}",
        f"--kube-api-burst={args.burst}",
        f"--metrics-port={metrics_port}",
        "--metrics-bind-address=127.0.0.1",
        f"--health-port={health_port}",
        "--health-bind-address=127.0.0.1",
        f"--progress-port={free_port()}",
        "--progress-bind-address=127.0.0.1",
        "--progress-host=127.0.0.1",
        "--log-level=warning",
        *extra,
    ]


def print_reconcile_stats(metrics_port: int) -> None:
    """Reconcile count and mean duration from the operator's /metrics."""
    import urllib.request

    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    total = count = requests = 0.0
    for line in text.splitlines():
        if line.startswith("kubetrain_api_requests "):
            requests = float(line.rsplit(" ", 1)[1])
        if line.startswith("kubetrain_reconcile_duration_seconds_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kubetrain_reconcile_duration_seconds_count"):
            count += float(line.rsplit(" ", 1)[1])
    if count:
        print(
            f"reconciles: {count:.0f}, mean {total / count * 1000:.0f} ms; "
            f"API requests: {requests:.0f}"
        )


def job_body(kind: str, name: str) -> dict[str, Any]:
    """This module's job of ``kind`` named ``name``."""
    return {"PyTorchJob": pytorch_job, "MPIJob": mpi_job, "TrainJob": trainjob}[kind](name)


def submit(
    api: KubeApi,
    names: list[tuple[str, str]],
    times: Mapping[str, JobTimes],
    *,
    threads: int,
    build: Callable[[str, str], dict[str, Any]] = job_body,
) -> None:
    """Create the jobs (``build(kind, name)``) from ``threads`` threads (a burst, as a
    pipeline submitting a sweep)."""
    pending = list(reversed(names))
    lock = threading.Lock()

    def run() -> None:
        while True:
            with lock:
                if not pending:
                    return
                kind, name = pending.pop()
            body = build(kind, name)
            times[name].submitted = time.monotonic()
            api.create(body)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def prepare(api: KubeApi, crds: list[dict[str, Any]]) -> None:
    """The CRDs, the benchmark's namespace (ready for pods) and the torch runtime."""
    for crd in crds:
        api.apply(crd, resource=CRDS)
    try:
        api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            resource=NAMESPACES,
        )
    except ApiError as err:
        if err.status != 409:
            raise
    wait_ready(api)
    api.apply(runtime(), resource=RUNTIME_RESOURCES["ClusterTrainingRuntime"])


def wait_ready(api: KubeApi) -> None:
    """Until the CRDs are served and the namespace can hold pods."""
    for _ in range(120):
        try:
            for resource in JOB_RESOURCES.values():
                api.list(resource, NAMESPACE)
            if api.get(
                Resource("", "v1", "serviceaccounts", "ServiceAccount"), NAMESPACE, "default"
            ):
                return
        except ApiError:
            pass
        time.sleep(0.5)
    raise SystemExit("the CRDs or the namespace did not become ready in 60s")


def _rows(times: list[JobTimes], pod_start: list[float] | None) -> list[tuple[str, list[float]]]:
    first = [t.first_child_at - t.submitted for t in times if t.first_child_at]
    ungated = [t.ungated_at - t.submitted for t in times if t.ungated_at]
    gated = [
        t.children_at - t.gate_open_at
        for t in times
        if t.children_at and t.gate_open_at and t.children_at >= t.gate_open_at
    ]
    children = [t.children_at - t.submitted for t in times if t.children_at]
    running = [t.running_at - t.submitted for t in times if t.running_at]
    rows = [
        ("create -> first child", first),
        ("create -> ungated children", ungated),
        ("gate open -> gated children", gated),
        ("create -> all children", children),
        ("create -> Running", running),
    ]
    if pod_start is not None:
        rows.append(("pod created -> Running", pod_start))
    return [(label, values) for label, values in rows if values]


def _print_rows(rows: list[tuple[str, list[float]]]) -> None:
    print(f"{'':30}{'p50':>9}{'p99':>9}{'max':>9}   samples")
    for label, values in rows:
        print(
            f"  {label:28}{percentile(values, 50):8.2f}s{percentile(values, 99):8.2f}s"
            f"{max(values, default=float('nan')):8.2f}s   {len(values)}"
        )


def report(args: argparse.Namespace, run: Run) -> None:
    times, submitted, wall = run.times, run.submitted, run.wall
    cpu, peak_rss, pod_start = run.cpu, run.peak_rss, run.pod_start
    flags = f"--workers={args.workers} --kube-api-qps={args.qps:g} --kube-api-burst={args.burst}"
    print(f"\noperator: {flags}")
    print(
        f"jobs: {args.pytorch_jobs} PyTorchJobs (1 Master + 3 Workers) + {args.mpi_jobs} MPIJobs "
        f"(2 workers) + {args.trainjobs} TrainJobs ({TRAINJOB_NODES} nodes) on "
        f"{args.gpu_nodes} fake GPU nodes; submitted in {submitted:.1f}s"
    )
    print("all jobs:")
    _print_rows(_rows(list(times.values()), pod_start))
    by_kind: dict[str, list[JobTimes]] = {}
    for t in times.values():
        by_kind.setdefault(t.kind, []).append(t)
    for kind, kind_times in by_kind.items():
        print(f"{kind} ({len(kind_times)}):")
        _print_rows(_rows(kind_times, None))
    pytorch = [t.children_at - t.submitted for t in by_kind.get("PyTorchJob", []) if t.children_at]
    train = [t.children_at - t.submitted for t in by_kind.get("TrainJob", []) if t.children_at]
    if pytorch and train:
        ratio = percentile(train, 99) / percentile(pytorch, 99)
        print(f"TrainJob / PyTorchJob, create -> all children p99: {ratio:.2f}x")
    running = sum(1 for t in times.values() if t.running_at is not None)
    if running < len(times):
        print(f"NOT RUNNING after {wall:.0f}s: {len(times) - running} of {len(times)} jobs")
    print(f"total wall time (first create -> last Running): {wall:.1f}s")
    print(f"operator CPU: {cpu:.1f}s   operator peak RSS: {peak_rss:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(main())
