"""Metrics read from the operator's caches at scrape time: how many jobs are in each
state (by kind, namespace and Kueue queue), how long the oldest has waited, the GPUs
running jobs hold, TrainJob progress staleness, the API requests made and the watches
restarted.

Nothing here is per job name: a scrape costs one pass over the cached jobs and pods,
and the series are bounded by kinds x namespaces x states x queues (see
``controller/metrics.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from kubetrain.api import keys as K
from kubetrain.api.common import ConditionType, JobStatus
from kubetrain.controller import conditions as C
from kubetrain.controller import podstate
from kubetrain.controller.cluster_state import KubeCluster
from kubetrain.controller.kube import KubeApi
from kubetrain.controller.metrics import CATALOGUE, JOB_STATES, WAITING_STATES
from kubetrain.controller.plugins.base import StatusCodec
from kubetrain.controller.policies.goodput import ratio

Obj = Mapping[str, Any]


def job_state(status: JobStatus, labels: Mapping[str, str]) -> str:
    """One of :data:`JOB_STATES` for a job's conditions and labels."""
    result = C.finished(status)
    if result is not None:
        return "succeeded" if result is ConditionType.SUCCEEDED else "failed"
    if C.is_true(status, ConditionType.SUSPENDED):
        return "queued" if labels.get(K.KUEUE_QUEUE_NAME_LABEL) else "suspended"
    if C.is_true(status, ConditionType.RESTARTING):
        return "restarting"
    if C.is_true(status, ConditionType.RUNNING):
        return "running"
    return "pending"


def pod_gpus(pod: Obj) -> int:
    """GPUs a pod requests (its containers' ``nvidia.com/gpu`` limits, else requests)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(K.GPU_RESOURCE)
        if value is None:
            value = (resources.get("requests") or {}).get(K.GPU_RESOURCE)
        try:
            total += int(str(value)) if value is not None else 0
        except ValueError:
            continue  # the API server accepts only whole GPUs; never seen
    return total


def pod_pool(pod: Obj) -> str:
    """The GPU pool a pod is bound to by node selector, 'none' when unbound."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return str(selector.get(K.GPU_POOL_LABEL) or "none")


class JobSource(Protocol):
    """What the collector reads: the operator's caches and API client."""

    def cached_jobs(self) -> Iterable[tuple[str, Obj]]:
        """(kind, job) for every cached job."""
        ...

    def status_of(self, kind: str, raw: Obj) -> JobStatus:
        """The job's status as the operator reads it (a TrainJob's bookkeeping too)."""
        ...

    def pods_of(self, kind: str, raw: Obj) -> Iterable[Obj]:
        """The job's cached pods."""
        ...

    def api_requests(self) -> Mapping[tuple[str, str], int]:
        """Requests made so far, by (verb, code)."""
        ...

    def watch_restarts(self) -> Mapping[tuple[str, str], int]:
        """Watch restarts so far, by (resource, reason)."""
        ...


@dataclass
class Summary:
    """One pass over the cached jobs."""

    jobs: dict[tuple[str, str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    oldest_waiting: dict[tuple[str, str, str], float] = field(default_factory=dict)
    gpus: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    progress_stale: dict[str, float] = field(default_factory=dict)
    #: (kind, namespace): lowest live goodput, lost seconds, steps redone.
    goodput_min: dict[tuple[str, str], float] = field(default_factory=dict)
    lost: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    redone: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))


def summarize(source: JobSource, now: datetime) -> Summary:
    """Count the cached jobs by state, their waits, GPUs and progress staleness."""
    out = Summary()
    groups: set[tuple[str, str, str]] = set()
    for kind, raw in source.cached_jobs():
        meta = raw.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        namespace = str(meta.get("namespace") or "")
        labels = meta.get("labels") or {}
        queue = str(labels.get(K.KUEUE_QUEUE_NAME_LABEL) or "")
        status = source.status_of(kind, raw)
        state = job_state(status, labels)
        groups.add((kind, namespace, queue))
        out.jobs[(kind, namespace, state, queue)] += 1
        if state in WAITING_STATES:
            since = C.waiting_since(status, C.parse_time(meta.get("creationTimestamp")))
            if since is not None:
                age = max(0.0, (now - since).total_seconds())
                key = (kind, namespace, state)
                out.oldest_waiting[key] = max(age, out.oldest_waiting.get(key, 0.0))
        if status.goodput is not None:
            _count_goodput(out, (kind, namespace), status, state, now)
        if state not in ("running", "restarting"):
            continue
        for pod in source.pods_of(kind, raw):
            if (pod.get("metadata") or {}).get("deletionTimestamp") or podstate.phase(pod) in (
                "Succeeded",
                "Failed",
            ):
                continue
            gpus = pod_gpus(pod)
            if gpus:
                out.gpus[(namespace, pod_pool(pod))] += gpus
        reported = C.parse_time(
            ((raw.get("status") or {}).get("trainerStatus") or {}).get("lastUpdatedTime")
        )
        if reported is not None:
            stale = max(0.0, (now - reported).total_seconds())
            out.progress_stale[namespace] = max(stale, out.progress_stale.get(namespace, 0.0))
    # Every state of a (kind, namespace, queue) seen is reported, at 0 when empty, so a
    # panel or rule reading one state does not see the series vanish and reappear.
    for kind, namespace, queue in groups:
        for state in JOB_STATES:
            out.jobs.setdefault((kind, namespace, state, queue), 0)
    return out


def _count_goodput(
    out: Summary, key: tuple[str, str], status: JobStatus, state: str, now: datetime
) -> None:
    goodput = status.goodput
    assert goodput is not None
    live = ratio(goodput, now)
    opened = C.parse_time(goodput.open_since)
    out.lost[key] += goodput.lost_seconds + (
        max(0.0, (now - opened).total_seconds()) if opened else 0.0
    )
    out.redone[key] += goodput.steps_redone
    if live is not None and state in ("running", "restarting"):
        out.goodput_min[key] = min(live, out.goodput_min.get(key, 1.0))


class ClusterCollector(Collector):
    """The scrape-time metrics of :mod:`kubetrain.controller.metrics`' catalogue."""

    def __init__(self, source: JobSource, clock: Callable[[], datetime]) -> None:
        self.source = source
        self.clock = clock

    def describe(self) -> list[Any]:
        return []  # unchecked: the families depend on the caches

    def collect(self) -> Iterator[Any]:
        docs = {d.name: d for d in CATALOGUE}

        def gauge(name: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, docs[name].help, labels=docs[name].labels)

        def counter(name: str) -> CounterMetricFamily:
            base = name.removesuffix("_total")
            return CounterMetricFamily(base, docs[name].help, labels=docs[name].labels)

        summary = summarize(self.source, self.clock())
        jobs = gauge("kubetrain_jobs")
        for (kind, namespace, state, queue), count in sorted(summary.jobs.items()):
            jobs.add_metric([kind, namespace, state, queue], count)
        oldest = gauge("kubetrain_job_oldest_waiting_seconds")
        for (kind, namespace, state), age in sorted(summary.oldest_waiting.items()):
            oldest.add_metric([kind, namespace, state], age)
        gpus = gauge("kubetrain_gpus_requested")
        for (namespace, pool), count in sorted(summary.gpus.items()):
            gpus.add_metric([namespace, pool], count)
        stale = gauge("kubetrain_trainjob_progress_stale_seconds")
        for namespace, age in sorted(summary.progress_stale.items()):
            stale.add_metric([namespace], age)
        low = gauge("kubetrain_job_goodput_min_ratio")
        for (kind, namespace), value in sorted(summary.goodput_min.items()):
            low.add_metric([kind, namespace], value)
        lost = gauge("kubetrain_job_lost_seconds")
        for (kind, namespace), seconds in sorted(summary.lost.items()):
            lost.add_metric([kind, namespace], seconds)
        redone = gauge("kubetrain_job_steps_redone")
        for (kind, namespace), steps in sorted(summary.redone.items()):
            redone.add_metric([kind, namespace], steps)
        requests = counter("kubetrain_api_requests_total")
        for (verb, code), count in sorted(self.source.api_requests().items()):
            requests.add_metric([verb, code], count)
        restarts = counter("kubetrain_watch_restarts_total")
        for (resource, reason), count in sorted(self.source.watch_restarts().items()):
            restarts.add_metric([resource, reason], count)
        yield from (jobs, oldest, gpus, stale, low, lost, redone, requests, restarts)


class CacheSource:
    """:class:`JobSource` over a running operator's caches, plugins and API client."""

    def __init__(
        self,
        cluster: KubeCluster,
        codecs: Mapping[str, StatusCodec],
        api: KubeApi,
        clock: Callable[[], datetime],
    ) -> None:
        self.cluster = cluster
        self.codecs = codecs
        self.api = api
        self.clock = clock

    def cached_jobs(self) -> Iterator[tuple[str, Obj]]:
        for (kind, _scope), informer in self.cluster.job_informers.items():
            for obj in informer.items():
                yield kind, obj

    def status_of(self, kind: str, raw: Obj) -> JobStatus:
        return self.codecs[kind].read(raw.get("status"))

    def pods_of(self, kind: str, raw: Obj) -> Iterable[Obj]:
        meta = raw.get("metadata") or {}
        key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        return self.cluster.observed(key, str(meta.get("uid") or ""), self.clock()).pods.values()

    def api_requests(self) -> Mapping[tuple[str, str], int]:
        return self.api.calls()

    def watch_restarts(self) -> Mapping[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = defaultdict(int)
        for informer in self.cluster.informers():
            for reason, count in informer.restarts.items():
                out[(informer.resource.plural, reason)] += count
        return out
