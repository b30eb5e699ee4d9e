"""How fast an elastic PyTorchJob follows a scale on the local control plane:
``python -m benchmarks.elastic_cluster`` (or ``make bench-elastic``).

On a control plane of its own with resource metrics (``LocalCluster(metrics=True)``:
metrics-server over kwok's emulated usage, the short HPA settings of ``cluster/metrics.py``)
and the kubetrain operator as its own process, two elastic PyTorchJobs of kwok fake pods
(Workers only, 1 to 3, each pod requesting 100m of CPU):

- ``hpa``, with ``elasticPolicy.metrics`` (CPU ``Utilization`` 50%), so the operator makes
  its HorizontalPodAutoscaler; its load is a kwok ``ClusterResourceUsage`` over the
  namespace's pods, ``--high`` then ``--low``, each change one run:

  (a) scale-up: load raised -> the HPA's decision -> the new Workers Running;
  (b) scale-down: load lowered -> the HPA's decision -> the surplus Workers gone;

- ``manual``, without metrics (no HPA):

  (c) ``kubectl scale pytorchjob manual --replicas=3`` (the scale subresource) -> the new
      Workers Running, and back to 1 -> the surplus gone.

Clocks: everything runs on this machine, so the API server's timestamps and this
process's ``time.time()`` share a clock. The HPA's decision is its ``status.lastScaleTime``
(whole seconds: the API truncates it; its ``SuccessfulRescale`` Event's timestamps are
whole seconds too, and used instead only if the Event carries a microsecond
``eventTime``), so a figure from the decision reads up to 1s long and one to the
decision up to 1s short. The precise marker beside it is the scale write itself: the
job's ``Worker.replicas`` changing, seen on a watch by this process (milliseconds, plus
the watch's delivery delay). A pod's Running and its deletion ("gone") are the times this
process sees them on its pod watch (the Ready condition's ``lastTransitionTime`` is also
whole seconds). Each load change waits a random 0 to ``--jitter`` seconds first, so the
runs sample its phase against metrics-server's scrapes (every 10s). Figures to compare,
never assertions.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.operator_scale import NAMESPACE, operator_command, prepare
from cluster.local import LocalCluster
from cluster.metrics import HPA_ARGS, METRIC_RESOLUTION
from cluster.process import free_port
from kubetrain.api import keys as K
from kubetrain.api.crds import all_crds
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import AUTOSCALERS, EVENTS, JOB_RESOURCES, PODS, KubeApi, Resource

PYTORCHJOBS = JOB_RESOURCES["PyTorchJob"]
USAGE = Resource(
    "kwok.x-k8s.io", "v1alpha1", "clusterresourceusages", "ClusterResourceUsage", False
)
IMAGE = "registry.example/trainer:1"
CPU_REQUEST = "100m"
TARGET_UTILIZATION = 50
MIN_WORKERS, MAX_WORKERS = 1, 3
HPA_JOB, MANUAL_JOB = "hpa", "manual"


def elastic_job(name: str, *, metrics: bool) -> dict[str, Any]:
    """Upstream's elastic shape: Workers only, 1 to 3, with an HPA on CPU if ``metrics``."""
    policy: dict[str, Any] = {
        "minReplicas": MIN_WORKERS,
        "maxReplicas": MAX_WORKERS,
        "rdzvBackend": "c10d",
    }
    if metrics:
        target = {"type": "Utilization", "averageUtilization": TARGET_UTILIZATION}
        policy["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
    container = {"name": "pytorch", "image": IMAGE, "resources": {"requests": {"cpu": CPU_REQUEST}}}
    return {
        "apiVersion": PYTORCHJOBS.api_version,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "elasticPolicy": policy,
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": MIN_WORKERS,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }


def load(cpu: str) -> dict[str, Any]:
    """Every pod of the benchmark's namespace uses ``cpu`` (kwok's ClusterResourceUsage)."""
    return {
        "apiVersion": USAGE.api_version,
        "kind": USAGE.kind,
        "metadata": {"name": f"load-{NAMESPACE}"},
        "spec": {
            "selector": {"matchNamespaces": [NAMESPACE]},
            "usages": [{"usage": {"cpu": {"value": cpu}, "memory": {"value": "64Mi"}}}],
        },
    }


def stamp(value: Any) -> float | None:
    """An API timestamp (``2025-01-01T00:00:00Z``, or a MicroTime) in epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


@dataclass
class PodSeen:
    name: str
    job: str
    seen: float
    running: float | None = None
    ready_transition: float | None = None
    deleting: float | None = None
    gone: float | None = None


@dataclass
class Seen:
    """What this process's watches saw, with the time (``time.time()``) it saw it."""

    pods: dict[str, PodSeen] = field(default_factory=dict)  # by uid
    #: (seen, job, Worker.replicas) each time a job's Worker count changed.
    writes: list[tuple[float, str, int]] = field(default_factory=list)
    replicas: dict[str, int] = field(default_factory=dict)
    hpas: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)  # by uid
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pod(self, kind: str, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        job = (meta.get("labels") or {}).get(K.JOB_NAME)
        if job is None:
            return
        seen = self.pods.setdefault(meta["uid"], PodSeen(meta["name"], str(job), now))
        status = obj.get("status") or {}
        if kind == "DELETED":
            seen.gone = seen.gone or now
        if meta.get("deletionTimestamp"):
            seen.deleting = seen.deleting or now
        if status.get("phase") == "Running" and seen.running is None:
            seen.running = now
        for condition in status.get("conditions") or []:
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                seen.ready_transition = stamp(condition.get("lastTransitionTime"))

    def job(self, kind: str, obj: dict[str, Any], now: float) -> None:
        name = str(obj["metadata"]["name"])
        specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        replicas = int((specs.get("Worker") or {}).get("replicas", 0))
        if kind != "DELETED" and self.replicas.get(name) != replicas:
            if name in self.replicas:
                self.writes.append((now, name, replicas))
            self.replicas[name] = replicas

    def hpa(self, kind: str, obj: dict[str, Any], now: float) -> None:
        self.hpas[str(obj["metadata"]["name"])] = obj

    def event(self, kind: str, obj: dict[str, Any], now: float) -> None:
        self.events[str(obj["metadata"]["uid"])] = obj

    def live(self, job: str) -> dict[str, PodSeen]:
        """The job's pods that exist and are not being deleted, by uid."""
        return {
            uid: p
            for uid, p in self.pods.items()
            if p.job == job and p.gone is None and p.deleting is None
        }


class Watches:
    """One thread per resource, listing then watching the namespace into ``Seen``."""

    def __init__(self, api: KubeApi, seen: Seen) -> None:
        self.api = api
        self.seen = seen
        self.stop = threading.Event()
        handlers: list[tuple[Resource, Callable[[str, dict[str, Any], float], None]]] = [
            (PODS, seen.pod),
            (PYTORCHJOBS, seen.job),
            (AUTOSCALERS, seen.hpa),
            (EVENTS, seen.event),
        ]
        self.threads = [threading.Thread(target=self._watch, args=h, daemon=True) for h in handlers]
        for thread in self.threads:
            thread.start()

    def _watch(
        self, resource: Resource, handle: Callable[[str, dict[str, Any], float], None]
    ) -> None:
        while not self.stop.is_set():
            try:
                items, rv = self.api.list(resource, NAMESPACE)
                now = time.time()
                with self.seen.lock:
                    for item in items:
                        handle("ADDED", item, now)
                while not self.stop.is_set():
                    for event in self.api.watch(
                        resource, NAMESPACE, resource_version=rv, timeout_seconds=60
                    ):
                        now = time.time()
                        if event.type == "ERROR":
                            raise ApiError(410, "Expired", "watch expired")
                        rv = str(event.object.get("metadata", {}).get("resourceVersion") or rv)
                        if event.type in ("ADDED", "MODIFIED", "DELETED"):
                            with self.seen.lock:
                                handle(event.type, event.object, now)
            except ApiError:
                time.sleep(0.2)


def one_running(seen: Seen, job: str) -> bool:
    """Whether ``job`` runs exactly one Worker, Running."""
    return [p.running is not None for p in seen.live(job).values()] == [True]


def wait(seen: Seen, done: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with seen.lock:
            if done():
                return
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


@dataclass
class Scale:
    """One scale's figures in seconds (None where not measured)."""

    label: str
    change_to_decision: float | None  # load change (or kubectl call) -> decision
    change_to_write: float  # load change (or kubectl call) -> the scale write, watched
    decision_to_done: float | None  # decision -> last new pod Running / surplus gone
    write_to_done: float  # the scale write, watched -> the same
    change_to_done: float  # load change (or kubectl call) -> the same
    steps: list[int]
    decision_source: str = "-"
    ready_after_decision: float | None = None  # last new pod's Ready transition - decision


def decision_of(seen: Seen, since: float) -> tuple[float | None, str]:
    """The HPA's last decision after ``since``: the SuccessfulRescale Event's eventTime
    when it carries one (microseconds), else the HPA's ``lastScaleTime`` (seconds)."""
    with seen.lock:
        hpa = seen.hpas.get(HPA_JOB) or {}
        events = [
            e
            for e in seen.events.values()
            if e.get("reason") == "SuccessfulRescale"
            and (e.get("involvedObject") or {}).get("name") == HPA_JOB
        ]
    micro = [t for e in events if (t := stamp(e.get("eventTime"))) and t >= since - 1]
    if micro:
        return max(micro), "SuccessfulRescale eventTime"
    last = stamp((hpa.get("status") or {}).get("lastScaleTime"))
    if last is not None and last >= int(since):
        return last, "HPA lastScaleTime"
    return None, "-"


def one_scale(
    seen: Seen,
    job: str,
    to: int,
    change: Callable[[], object],
    label: str,
    *,
    hpa: bool,
    timeout: float,
) -> Scale:
    """Make ``change``, wait for ``job`` to run exactly ``to`` Workers, and time it."""
    with seen.lock:
        before = set(seen.live(job))
        writes_before = len(seen.writes)
    began = time.time()
    change()

    def settled() -> bool:
        live = seen.live(job)
        return (
            seen.replicas.get(job) == to
            and len(live) == to
            and all(p.running for p in live.values())
            and all(seen.pods[uid].gone for uid in before - set(live))
        )

    wait(seen, settled, f"{job} at {to} Workers", timeout)
    with seen.lock:
        writes = [(t, n) for t, j, n in seen.writes[writes_before:] if j == job]
        new = [p for uid, p in seen.live(job).items() if uid not in before]
        surplus = [seen.pods[uid] for uid in before if uid not in seen.live(job)]
    if new:
        done = max(p.running or 0.0 for p in new)
        ready = max((p.ready_transition or 0.0 for p in new), default=0.0) or None
    else:
        done = max(p.gone or 0.0 for p in surplus)
        ready = None
    last_write = writes[-1][0]
    decision, source = decision_of(seen, began) if hpa else (None, "-")
    return Scale(
        label=label,
        change_to_decision=None if decision is None else decision - began,
        change_to_write=writes[0][0] - began,
        decision_to_done=None if decision is None else done - decision,
        write_to_done=done - last_write,
        change_to_done=done - began,
        steps=[n for _, n in writes],
        decision_source=source,
        ready_after_decision=None if decision is None or ready is None else ready - decision,
    )


#: The printed columns: heading, and the figure of a Scale.
COLUMNS: tuple[tuple[str, Callable[[Scale], float | None]], ...] = (
    ("change>decision", lambda s: s.change_to_decision),
    ("change>write", lambda s: s.change_to_write),
    ("decision>done", lambda s: s.decision_to_done),
    ("write>done", lambda s: s.write_to_done),
    ("change>done", lambda s: s.change_to_done),
)
HEADER = f"  {'':22}" + "".join(f"{h:>16}" for h, _ in COLUMNS)


def cell(value: float | None) -> str:
    return f"{'-' if value is None else f'{value:.2f}':>16}"


def show(scale: Scale, run: int) -> None:
    steps = " -> ".join(str(n) for n in scale.steps)
    figures = "".join(cell(get(scale)) for _, get in COLUMNS)
    print(f"  {scale.label + f' run {run}':22}{figures}   Workers -> {steps}", flush=True)


def summary(label: str, scales: list[Scale]) -> None:
    def median(get: Callable[[Scale], float | None]) -> float | None:
        real = [v for s in scales if (v := get(s)) is not None]
        return statistics.median(real) if real else None

    figures = "".join(cell(median(get)) for _, get in COLUMNS)
    print(f"  {label + f' ({len(scales)} runs)':22}{figures}")


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load1, load5, _ = os.getloadavg()
    return f"{os.cpu_count()} cores ({model}), load average {load1:.2f} / {load5:.2f} (1 / 5 min)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.elastic_cluster", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3, help="scale-ups (and downs) of each kind")
    parser.add_argument("--high", default="1000m", help="the load that scales up (of 100m)")
    parser.add_argument("--low", default="10m", help="the load that scales down (of 100m)")
    parser.add_argument(
        "--jitter",
        type=float,
        default=10,
        help="at most this many seconds, at random, before each load change",
    )
    parser.add_argument(
        "--budget", type=float, default=330, help="seconds after which no new run starts"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-bench-elastic-"))
    cluster = LocalCluster(workdir / "cluster", metrics=True)
    operator: subprocess.Popen[bytes] | None = None
    watches: Watches | None = None
    api: KubeApi | None = None
    print(f"machine: {machine()}")
    try:
        cluster.up(timeout=300)
        print(f"control plane with metrics up in {time.monotonic() - started:.1f}s", flush=True)
        api = kube = KubeApi.connect(str(cluster.kubeconfig), qps=100, burst=200)
        prepare(kube, all_crds())
        log_path = workdir / "operator.log"
        settings = argparse.Namespace(workers=2, qps=100, burst=200)
        operator = subprocess.Popen(
            operator_command(
                cluster.kubeconfig, settings, metrics_port=free_port(), health_port=free_port()
            ),
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        seen = Seen()
        watches = Watches(kube, seen)
        kube.apply(load(args.low), resource=USAGE)
        kube.create(elastic_job(HPA_JOB, metrics=True), resource=PYTORCHJOBS)
        kube.create(elastic_job(MANUAL_JOB, metrics=False), resource=PYTORCHJOBS)
        for job in (HPA_JOB, MANUAL_JOB):
            wait(
                seen,
                partial(one_running, seen, job),
                f"{job}'s first Worker Running",
                120,
            )

        # (c) first: the HPA needs two scrapes of the first Worker before it measures.
        manual: dict[str, list[Scale]] = {"kubectl up": [], "kubectl down": []}
        print("\n(c) kubectl scale pytorchjob manual (no HPA), seconds (change: the call):")
        print(HEADER)
        for run in range(1, args.runs + 1):
            for label, to in (("kubectl up", MAX_WORKERS), ("kubectl down", MIN_WORKERS)):
                replicas = f"--replicas={to}"
                scale = one_scale(
                    seen,
                    MANUAL_JOB,
                    to,
                    partial(
                        cluster.kubectl,
                        "scale",
                        "-n",
                        NAMESPACE,
                        "pytorchjob",
                        MANUAL_JOB,
                        replicas,
                    ),
                    label,
                    hpa=False,
                    timeout=60,
                )
                manual[label].append(scale)
                show(scale, run)

        def measuring() -> bool:
            status = (seen.hpas.get(HPA_JOB) or {}).get("status") or {}
            return any(
                ((m.get("resource") or {}).get("current") or {}).get("averageUtilization")
                is not None
                for m in status.get("currentMetrics") or []
            )

        wait(seen, measuring, "the HPA to measure the Workers' CPU", 120)
        with seen.lock:
            hpa = dict(seen.hpas[HPA_JOB])
        spec = hpa["spec"]
        print(
            f"\nHPA {HPA_JOB}: min {spec['minReplicas']} max {spec['maxReplicas']}, "
            f"metrics {spec['metrics']}, behavior {spec.get('behavior', 'default')}"
        )
        print(
            "kube-controller-manager: "
            + ", ".join(f"--{k}={v}" for k, v in HPA_ARGS)
            + f"; metrics-server --metric-resolution={METRIC_RESOLUTION}"
        )
        print(f"load: {args.low} -> {args.high} -> {args.low} of {CPU_REQUEST} per pod")

        auto: dict[str, list[Scale]] = {"HPA up": [], "HPA down": []}
        print(f"\n(a) and (b) the HPA over PyTorchJob {HPA_JOB}, seconds (change: the load's):")
        print(HEADER)
        for run in range(1, args.runs + 1):
            if run > 1 and time.monotonic() - started > args.budget:
                print(f"  (budget of {args.budget:.0f}s spent: no run {run})")
                break
            for label, to, cpu, timeout in (
                ("HPA up", MAX_WORKERS, args.high, 120),
                ("HPA down", MIN_WORKERS, args.low, 180),
            ):
                # A random phase against metrics-server's scrapes, which the load's
                # change would otherwise keep from one run to the next.
                time.sleep(random.uniform(0, args.jitter))
                scale = one_scale(
                    seen,
                    HPA_JOB,
                    to,
                    partial(kube.apply, load(cpu), resource=USAGE),
                    label,
                    hpa=True,
                    timeout=timeout,
                )
                auto[label].append(scale)
                show(scale, run)
        print("\nmedians, seconds (done: the last new Worker Running, or the last surplus gone):")
        print(HEADER)
        for label, scales in {**auto, **manual}.items():
            summary(label, scales)
        sources = sorted({s.decision_source for scales in auto.values() for s in scales})
        print(f"  decision: {', '.join(sources)}")
        readies = [r for s in auto["HPA up"] if (r := s.ready_after_decision) is not None]
        if readies:
            shown = ", ".join(f"{r:.0f}" for r in readies)
            print(
                f"  HPA up: last new pod's Ready lastTransitionTime - decision: {shown} (1s grain)"
            )
        print(f"\ntotal {time.monotonic() - started:.0f}s")
        return 0
    finally:
        if watches is not None:
            watches.stop.set()
        if operator is not None and operator.poll() is None:
            operator.terminate()
            operator.wait(timeout=30)
        if api is not None:
            api.close()
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
