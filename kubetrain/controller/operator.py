"""The operator process: informers, work queue, workers, leader election, metrics and
health endpoints, and a graceful shutdown.

``Operator.run(stop)`` blocks until ``stop`` is set (SIGTERM in ``kubetrain operator``)
or leadership is lost; it returns the process exit code.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from kubetrain.controller.cluster_state import JobKey, KubeCluster
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.errors import ApiError, Deposed, ErrorClass
from kubetrain.controller.gang import GangConfig
from kubetrain.controller.health import HttpServers
from kubetrain.controller.job_metrics import CacheSource, ClusterCollector
from kubetrain.controller.kube import LEASES, POD_GROUP_RESOURCES, KubeApi
from kubetrain.controller.leader import LeaderElector
from kubetrain.controller.metrics import Metrics
from kubetrain.controller.plugins.progress_env import ProgressInjection
from kubetrain.controller.plugins.registry import build_registry
from kubetrain.controller.reconciler import Reconciler
from kubetrain.controller.status_auth import TokenAuthorizer
from kubetrain.controller.status_kube import KubeProgressApi
from kubetrain.controller.status_server import ProgressEndpoint, ProgressServer
from kubetrain.controller.status_tls import ServingCertificates
from kubetrain.controller.workqueue import WorkQueue

log = logging.getLogger("kubetrain.operator")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: The Service the ``TrainingOperator`` construct puts in front of the progress server.
PROGRESS_SERVICE = "kubetrain-progress"


def default_identity() -> str:
    """``$POD_NAME``, else the host name, plus a random suffix (unique per process)."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{secrets.token_hex(4)}"


def lease_namespace() -> str:
    """Where the Lease lives: ``$POD_NAMESPACE``, the pod's own namespace, or default."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


class Operator:
    """One operator replica."""

    def __init__(
        self,
        config: OperatorConfig,
        api: KubeApi,
        *,
        identity: str | None = None,
        serve_http: bool = True,
        resync_seconds: float = 600.0,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        refusal_backoff_seconds: float = 2.0,
        progress_api: KubeApi | None = None,
    ) -> None:
        self.config = config
        self.api = api
        self.identity = identity or default_identity()
        self.metrics = Metrics(kinds=config.kinds)
        self.queue: WorkQueue[JobKey] = WorkQueue(on_wait=self.metrics.queue_wait.observe)
        self.elector: LeaderElector | None = None
        if config.leader_elect:
            self.elector = LeaderElector(
                api,
                namespace=lease_namespace(),
                name=config.leader_election_id,
                identity=self.identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                on_change=lambda leader: self.metrics.is_leader.set(1 if leader else 0),
            )
            api.fence = self.fence
        self.gang = GangConfig.of(config)
        self.plugins = build_registry(config.kinds, gang=self.gang)
        extra_children = ("PodGroup",) if self.gang is not None else ()
        self.cluster = KubeCluster(
            api,
            {kind: (*plugin.child_kinds, *extra_children) for kind, plugin in self.plugins.items()},
            config.namespaces,
            self.queue.add,
            identity=self.identity,
            exclude_namespaces=config.exclude_namespaces,
            may_write=self.may_write,
            event_qps=config.event_qps,
            pod_group_api_version=self.gang.backend.api_version if self.gang else None,
        )
        # Child writes of one reconcile go out concurrently: the API server's latency, not
        # the operator's CPU, bounds how fast a job gets its children.
        self.executor = ThreadPoolExecutor(
            max_workers=max(4, config.workers * 4), thread_name_prefix="write"
        )
        self.reconciler = Reconciler(
            self.cluster,
            self.cluster,
            self.plugins,
            metrics=self.metrics,
            startup_timeout_seconds=config.startup_timeout_seconds,
            success_grace_seconds=config.success_grace_seconds,
            progress_timeouts=(
                config.progress_timeout_seconds,
                config.progress_startup_timeout_seconds,
            ),
            executor=self.executor,
            refusal_backoff_seconds=refusal_backoff_seconds,
            node_rules=config.node_rules,
        )
        self.metrics.registry.register(
            ClusterCollector(
                CacheSource(
                    self.cluster,
                    {kind: plugin.status_codec for kind, plugin in self.plugins.items()},
                    api,
                    clock=lambda: datetime.now(UTC),
                ),
                clock=lambda: datetime.now(UTC),
            )
        )
        self.resync_seconds = resync_seconds
        self.progress = self._progress_server(progress_api)
        self.http: HttpServers | None = None
        if serve_http:
            self.http = HttpServers(
                health_port=config.health_port,
                metrics_port=config.metrics_port,
                registry=self.metrics.registry,
                healthz=self.healthz,
                readyz=self.readyz,
                health_address=config.health_bind_address,
                metrics_address=config.metrics_bind_address,
            )
        self.started = threading.Event()
        self._workers: list[threading.Thread] = []
        self._alive = True

    def _progress_server(self, api: KubeApi | None) -> ProgressServer | None:
        """The progress server (and what jobs' pods get to reach it), when it is on and
        has an API client of its own."""
        config = self.config
        if api is None or not config.progress_server:
            return None
        namespace = lease_namespace()
        host = config.progress_host or f"{PROGRESS_SERVICE}.{namespace}.svc"
        kube = KubeProgressApi(api, secret_namespace=namespace, secret_name=config.progress_secret)
        certificates = ServingCertificates(kube, [host])
        reports = self.metrics.progress_reports
        endpoint = ProgressEndpoint(
            TokenAuthorizer(kube), kube, on_report=lambda code: reports.labels(code=code).inc()
        )
        server = ProgressServer(
            endpoint, certificates, address=config.progress_bind_address, port=config.progress_port
        )

        def ca_bundle() -> str:
            material = certificates.material
            assert material is not None, "the progress server starts before any reconcile"
            return material.ca_bundle

        injection = ProgressInjection(f"https://{host}:{config.progress_port}", ca_bundle)
        for plugin in self.plugins.values():
            plugin.progress = injection
        return server

    # -- probes ------------------------------------------------------------------------

    def healthz(self) -> tuple[bool, str]:
        """Alive: the worker threads run (or are stopping on purpose)."""
        dead = [t.name for t in self._workers if not t.is_alive()]
        if dead and not self.queue.is_shutdown:
            return False, f"worker threads died: {', '.join(dead)}"
        return self._alive, "ok" if self._alive else "stopping"

    def readyz(self) -> tuple[bool, str]:
        """Ready: caches synced, or a standby replica waiting for the Lease."""
        if self.elector is not None and not self.elector.is_leader:
            return True, "standby: waiting for the leader lease"
        if not self.cluster.synced():
            return False, "caches not synced yet"
        return True, "ok"

    @property
    def is_leader(self) -> bool:
        """True when this replica acts (holds the Lease, or election is off)."""
        return self.elector is None or self.elector.is_leader

    def may_write(self) -> bool:
        """Whether a write may go out now: election is off, or this replica's last
        successful renewal is recent enough that no other replica can have taken the
        Lease (a replica paused past its lease resumes unable to write)."""
        return self.elector is None or self.elector.can_act()

    def fence(self, method: str, path: str) -> None:
        """Stops a write that is about to be sent while ``may_write`` is false (raises
        Deposed). The Lease itself is exempt: renewing it is how a replica proves it
        leads. Checked after the rate limiter, just before the request goes out."""
        elector = self.elector
        if elector is None or self.may_write():
            return
        leases = LEASES.path(elector.namespace)
        if path == leases or path == f"{leases}/{elector.name}":
            return
        raise Deposed(f"{method} {path}: this replica cannot prove it still holds the Lease")

    # -- main loop -----------------------------------------------------------------------

    def check_gang_scheduler(self) -> str | None:
        """Why the configured gang scheduler cannot be used (its PodGroup API is not
        served, or the operator may not list PodGroups), or None. Pods of a gang are
        never scheduled one by one instead."""
        if self.gang is None:
            return None
        backend = self.gang.backend
        resource = POD_GROUP_RESOURCES[backend.api_version]
        for scope in self.config.namespaces or (None,):
            try:
                self.api.request("GET", resource.path(scope), query={"limit": "1"})
            except ApiError as err:
                if err.status == 404:
                    return (
                        f"--gang-scheduler={backend.scheduler.value}: the PodGroup API "
                        f"{backend.api_version} is not served (CRD {backend.crd} is not "
                        f"installed); install {backend.scheduler.value} first, or run with "
                        "--gang-scheduler=none"
                    )
                if err.status == 403:
                    return (
                        f"--gang-scheduler={backend.scheduler.value}: the operator may not "
                        f"list {backend.crd}"
                        + (f" in namespace {scope}" if scope else "")
                        + f" ({err.message}); grant it the PodGroup rights of its RBAC"
                    )
                raise
        return None

    def run(self, stop: threading.Event) -> int:
        """Serve until ``stop`` is set; 0 on a clean stop, 1 when leadership was lost, 2
        when the configured gang scheduler is missing."""
        missing = self.check_gang_scheduler()
        if missing is not None:
            log.error("gang scheduler missing", extra={"error": missing})
            print(f"kubetrain operator: {missing}", file=sys.stderr)
            return 2
        if self.progress is not None:
            try:
                self.progress.start()
            except (ApiError, RuntimeError, OSError) as err:
                log.error("progress server cannot start", extra={"error": str(err)})
                print(
                    f"kubetrain operator: the progress server cannot load its certificate "
                    f"(Secret {self.config.progress_secret}): {err}; grant the operator that "
                    "Secret, or run with --progress-server=false",
                    file=sys.stderr,
                )
                return 2
        if self.http is not None:
            self.http.start()
        code = 0
        try:
            if self.elector is not None:
                log.info("waiting for leadership", extra={"identity": self.identity})
                if not self.elector.wait_for_leadership(stop):
                    return 0
                renewer = threading.Thread(
                    target=self.elector.keep_renewing, args=(stop,), name="lease", daemon=True
                )
                renewer.start()
            else:
                self.metrics.is_leader.set(1)
            self._start()
            last_resync = time.monotonic()
            while not stop.wait(0.5):
                self.metrics.queue_depth.set(len(self.queue))
                if self.elector is not None and self.elector.lost.is_set():
                    code = 1
                    break
                if time.monotonic() - last_resync > self.resync_seconds:
                    for key in self.cluster.job_keys():
                        self.queue.add(key)
                    last_resync = time.monotonic()
        finally:
            self._shutdown()
        return code

    def _start(self) -> None:
        log.info(
            "starting",
            extra={
                "identity": self.identity,
                "kinds": ",".join(self.config.kinds),
                "namespaces": ",".join(self.config.namespaces) or "*",
                "workers": self.config.workers,
            },
        )
        self.cluster.start()
        if not self.cluster.wait_synced(timeout=120):
            log.warning("caches did not sync in 120s; continuing, they keep retrying")
        for key in self.cluster.job_keys():
            self.queue.add(key)
        for index in range(self.config.workers):
            thread = threading.Thread(target=self._work, name=f"worker-{index}", daemon=True)
            thread.start()
            self._workers.append(thread)
        self.started.set()

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                result = self.reconciler.reconcile(key)
                self.queue.forget(key)
                if result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after)
            except Deposed:
                # Not provably the leader: the renewal loop decides; look again later.
                self.queue.add_after(key, 1.0)
            except ApiError as err:
                if err.error_class is ErrorClass.CONFLICT:
                    self.queue.add_after(key, 0.05)
                else:
                    delay = self.queue.add_rate_limited(key)
                    log.warning(
                        "reconcile failed, will retry",
                        extra={"job": "/".join(key), "error": str(err), "retry_in": delay},
                    )
            except Exception:
                delay = self.queue.add_rate_limited(key)
                log.exception(
                    "reconcile crashed, will retry", extra={"job": "/".join(key), "retry_in": delay}
                )
            finally:
                self.queue.done(key)

    def _shutdown(self) -> None:
        log.info("stopping", extra={"identity": self.identity})
        self._alive = False
        self.queue.shutdown()
        # Reconciles waiting for the API client's tokens end now (their work is redone by
        # whoever leads next: reconciles are idempotent); the Lease is released after.
        self.api.draining.set()
        deadline = time.monotonic() + 10
        for thread in self._workers:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.api.draining.clear()
        self.cluster.stop()
        if self.elector is not None:
            self.elector.release()
        self.metrics.is_leader.set(0)
        if self.http is not None:
            self.http.stop()
        if self.progress is not None:
            self.progress.stop()
        log.info("stopped", extra={"identity": self.identity, "api_writes": self.api.writes})
