"""The run half of ``benchmarks/goodput.py``: rank 0's log read from the node's pod log
files as the kubelet writes them, the faults injected into rank 1 (``ctr`` signals, the
Eviction API, a higher-priority job for Kueue), and one job's run from its creation to
its end or the deadline, for a PyTorchJob or a TrainJob (``JobKind``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from benchmarks.goodput_report import Fault, RankLog, Recovery, recovery
from tests.clusters import ClusterClients

#: How long a fault waits for rank 1's container to run before it is given up.
INJECT_PATIENCE = 60.0


@dataclass(frozen=True)
class JobKind:
    """How the benchmark finds a kind's ranks and reads its end. ``rank0`` is a glob of
    rank 0's pod names and ``rank1`` a label selector of rank 1's pods (``{name}``: the
    job's); ``done`` the condition type of success."""

    api_version: str
    kind: str
    done: str
    rank0: str
    rank1: str


#: The v1 kind: rank 0 is the master, rank 1 the first worker.
PYTORCHJOB = JobKind(
    "kubeflow.org/v1",
    "PyTorchJob",
    "Succeeded",
    rank0="{name}-master-0",
    rank1="training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type=worker,"
    "training.kubeflow.org/replica-index=0",
)
#: Trainer's kind: the JobSet's ``node`` Job's pods by completion index (the Job
#: controller appends five random characters to their names).
TRAINJOB = JobKind(
    "trainer.kubeflow.org/v1alpha1",
    "TrainJob",
    "Complete",
    rank0="{name}-node-0-0-?????",
    rank1="jobset.sigs.k8s.io/jobset-name={name},batch.kubernetes.io/job-completion-index=1",
)


class PodLogTail:
    """Every line the containers of one pod name write (each pod of that name, each
    container restart: a file of its own under ``root``), read as they are written, so
    that a deleted pod's lines are kept."""

    def __init__(self, root: Path, namespace: str, pod: str) -> None:
        self.root = root
        self.pattern = f"{namespace}_{pod}_*/*/*.log"
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, str] = {}
        self.log = RankLog()

    def poll(self) -> None:
        for path in sorted(self.root.glob(self.pattern)):
            if "init" in path.parent.name:
                continue
            try:
                with path.open("r", encoding="utf-8", errors="replace") as handle:
                    handle.seek(self.offsets.get(path, 0))
                    chunk = handle.read()
                    self.offsets[path] = handle.tell()
            except OSError:
                continue  # removed with its pod
            text = self.partial.pop(path, "") + chunk
            lines = text.split("\n")
            if lines[-1]:
                self.partial[path] = lines[-1]
            instance = str(path.relative_to(self.root))
            for line in lines[:-1]:
                self.log.add(instance, line)


class FaultInjector:
    """Injects each fault into rank 1 of job ``name`` (of ``kind``); ``urgent`` makes the
    preempting job's body."""

    def __init__(
        self,
        clients: ClusterClients,
        ctr: Callable[..., str | None],
        namespace: str,
        name: str,
        kind: JobKind,
        urgent: Callable[[], dict[str, Any]],
    ) -> None:
        self.clients = clients
        self.ctr = ctr
        self.namespace = namespace
        self.selector = kind.rank1.format(name=name)
        self.urgent = urgent

    def _running(self) -> tuple[str, str] | None:
        """Rank 1's running pod and container id, None while it is not running."""
        try:
            pods = self.clients.core_v1.list_namespaced_pod(
                self.namespace, label_selector=self.selector
            ).items
        except ApiException:
            return None
        for pod in pods:
            if pod.metadata is None or pod.status is None:
                continue
            if pod.metadata.deletion_timestamp or pod.status.phase != "Running":
                continue
            for status in pod.status.container_statuses or []:
                if status.state and status.state.running and status.container_id:
                    container = str(status.container_id).removeprefix("containerd://")
                    return str(pod.metadata.name), container
        return None

    def inject(self, kind: str) -> bool:
        """Inject ``kind`` now; False when rank 1 is not running (try again later)."""
        if kind == "preempt":
            body = self.urgent()
            resource = self.clients.dyn.resources.get(
                api_version=body["apiVersion"], kind=body["kind"]
            )
            resource.create(body=body, namespace=self.namespace)
            return True
        running = self._running()
        if running is None:
            return False
        pod, container = running
        if kind == "evict":
            meta = client.V1ObjectMeta(name=pod)
            self.clients.core_v1.create_namespaced_pod_eviction(
                pod, self.namespace, client.V1Eviction(metadata=meta)
            )
            return True
        if kind == "kill":
            self.ctr("task", "kill", "--signal", "SIGKILL", container)
        else:  # hang: every process of the container stopped, never continued
            self.ctr("task", "kill", "--all", "--signal", "SIGSTOP", container)
        return True


class Run:
    """One job from its creation to its end or the deadline, faults injected on time."""

    def __init__(
        self,
        clients: ClusterClients,
        namespace: str,
        name: str,
        kind: JobKind,
        tail: PodLogTail,
        injector: FaultInjector,
        faults: list[Fault],
    ) -> None:
        self.clients = clients
        self.done = kind.done
        self.namespace = namespace
        self.name = name
        self.tail = tail
        self.injector = injector
        self.faults = faults
        self.injected: dict[int, float] = {}
        self.notes: dict[int, str] = {}
        self.created = 0.0
        self.limit = 0.0
        self.finished = False
        self.last: dict[str, Any] = {}
        self.jobs = clients.dyn.resources.get(api_version=kind.api_version, kind=kind.kind)

    def _job(self) -> dict[str, Any]:
        try:
            found: dict[str, Any] = self.jobs.get(
                name=self.name, namespace=self.namespace
            ).to_dict()
        except ApiException:
            return self.last
        return found

    def go(self, job: dict[str, Any], *, deadline: float) -> str:
        """Create ``job``, inject the faults, return its outcome in words."""
        self.limit = deadline
        self.created = time.time()
        self.jobs.create(body=job, namespace=self.namespace)
        outcome = f"did not finish within the {deadline / 60:g}-minute deadline"
        checked = 0.0
        while (now := time.time()) - self.created < deadline:
            self.tail.poll()
            self._inject_due(now - self.created)
            if now - checked >= 2.0:
                checked = now
                self.last = self._job()
                done = {
                    c.get("type"): c
                    for c in (self.last.get("status") or {}).get("conditions") or []
                    if c.get("status") == "True" and c.get("type") in (self.done, "Failed")
                }
                if self.done in done:
                    self.finished, outcome = True, f"finished ({self.done})"
                    break
                if "Failed" in done:
                    failed = done["Failed"]
                    outcome = f"Failed ({failed.get('reason')}: {failed.get('message')})"
                    self.limit = now - self.created
                    break
            time.sleep(0.5)
        for _ in range(4):  # the last lines the kubelet has not flushed yet
            time.sleep(0.5)
            self.tail.poll()
        for index, _fault in enumerate(self.faults):
            if index not in self.injected and index not in self.notes:
                self.notes[index] = "not injected: the run ended first"
        return outcome

    def _inject_due(self, elapsed: float) -> None:
        for index, fault in enumerate(self.faults):
            if index in self.injected or index in self.notes or elapsed < fault.at:
                continue
            if self.injector.inject(fault.kind):
                self.injected[index] = time.time()
                late = elapsed - fault.at
                if late > 2.0:
                    self.notes[index] = f"injected {late:.0f} s late: rank 1 was not running"
                    # a note alone does not mark it done: keep the time
            elif elapsed - fault.at > INJECT_PATIENCE:
                self.notes[index] = f"not injected: rank 1 not running for {INJECT_PATIENCE:g} s"

    def recoveries(self) -> list[Recovery]:
        return [
            recovery(fault, self.injected.get(index), self.tail.log, self.notes.get(index, ""))
            for index, fault in enumerate(self.faults)
        ]

    def own_goodput(self) -> str:
        """kubetrain's ``status.goodput`` and its gang restarts, as the job ended."""
        status = self.last.get("status") or {}
        measured = status.get("goodput")
        if not measured:
            return "none in status"
        parts = [f"{key}={value}" for key, value in sorted(measured.items())]
        restarts = status.get("gangRestart")
        if restarts:
            parts.append("gangRestart=" + ",".join(f"{k}={v}" for k, v in sorted(restarts.items())))
        return "; ".join(parts)
